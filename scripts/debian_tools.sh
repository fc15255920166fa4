# Sourced by scripts/test.sh after scripts/setup.sh (whose services.sh defines debian_install): the programs some
# tests run that come from Debian's packages, not from PyPI, e.g.
#
#   debian_tool_ready /usr/bin/chromium chromium "the monitoring pages' browser tests use it" SPARK_TABLES_TEST_CHROMIUM
#
# returns 0 when the program (a full path) is there. As root, it installs the package (debian_install) when the program
# is missing; otherwise it says, in one line, the command to run and the setting that points the tests at another.
debian_tool_ready() {
  local program=$1 package=$2 used_for=$3 setting=$4
  [ -x "$program" ] && return 0
  if debian_install "$package" "Debian's $package for the tests"; then
    [ -x "$program" ] && return 0
    echo "error: installing $package failed (log: $AIRFLOW_HOME/apt-get-$package.log): run 'apt-get install $package' as root" >&2
    return 1
  fi
  echo "error: $program is missing ($used_for): run 'apt-get install $package' as root, or set $setting" >&2
  return 1
}
