"""scripts/standalone_left.py names what of ``airflow standalone`` is left by component, not by command line: real
processes in a session of their own, a component's child retitled as Airflow's children retitle themselves."""

from __future__ import annotations

import contextlib
import importlib.util
import subprocess
import sys
from pathlib import Path

import psutil

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "standalone_left.py"
_spec = importlib.util.spec_from_file_location("standalone_left", SCRIPT)
standalone_left = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(standalone_left)

#: Stands in for ``airflow standalone``: its components as ``airflow <role>`` children; the triggerer has a child
#: whose command line says nothing of it (``airflow serve-logs``); each writes its pid, then sleeps. Each line goes
#: to the shared pipe in one write(2), which no other process's line can split (print's text and newline are two
#: writes when Python's output is unbuffered: a pid and another's newline once made an empty line here).
_STANDALONE = r"""
import os, subprocess, sys, time
SLEEP = "import os, time; os.write(1, b'%d\\n' % os.getpid()); time.sleep(120)"
CHILD = "import os, shlex, subprocess, sys, time; os.write(1, b'%d\\n' % os.getpid()); " \
        "subprocess.Popen(['bash', '-c', 'exec -a \"airflow serve-logs\" ' + shlex.quote(sys.executable) + " \
        "' -c \"$0\"', sys.argv[1]]); time.sleep(120)"
for role in ("triggerer", "api_server -- host:0.0.0.0 port:8080"):
    subprocess.Popen([sys.executable, "-c", CHILD if role == "triggerer" else SLEEP, SLEEP, *role.split()])
os.write(1, b"ready\n")
time.sleep(120)
"""


def test_every_process_left_is_named_by_the_component_it_descends_from() -> None:
    standalone = subprocess.Popen(
        [sys.executable, "-c", _STANDALONE], stdout=subprocess.PIPE, text=True, start_new_session=True
    )
    pids: list[int] = []
    try:
        lines: list[str] = []
        while len(lines) < 4:  # the two components' pids, the serve-logs child's, and standalone's "ready", any order
            line = standalone.stdout.readline()
            assert line, f"the stand-in's output ended after {lines}: it exited with {standalone.wait(5)}"
            lines.append(line.strip())
        pids = [int(line) for line in lines if line != "ready"]
        processes = [psutil.Process(pid) for pid in pids]
        names = {process.pid: standalone_left.component(process, standalone.pid) for process in processes}

        assert sorted(names.values()) == ["api-server", "triggerer", "triggerer"], names
        line = standalone_left.left(standalone.pid)
        triggerer = sorted(pid for pid, name in names.items() if name == "triggerer")
        assert f"triggerer (pids {triggerer[0]}, {triggerer[1]})" in line, line
        assert f"standalone (pid {standalone.pid})" in line and "api-server (pid " in line, line

        standalone.kill()  # airflow standalone ends first: its components are children of init then
        standalone.wait()
        assert {process.pid: standalone_left.component(process, standalone.pid) for process in processes} == names
        after = standalone_left.left(standalone.pid)
        assert f"triggerer (pids {triggerer[0]}, {triggerer[1]})" in after and "standalone" not in after, after
    finally:
        for pid in pids:
            with contextlib.suppress(psutil.NoSuchProcess):
                psutil.Process(pid).kill()
        standalone.kill()
        standalone.wait()
