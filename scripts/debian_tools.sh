# Sourced by scripts/test.sh: the programs some tests run that come from Debian's packages, not from PyPI, e.g.
#
#   debian_tool_ready /usr/bin/chromium chromium "the monitoring pages' browser tests use it" SPARK_TABLES_TEST_CHROMIUM
#
# returns 0 when the program (a full path) is there. As root, it installs the package with apt-get when the program
# is missing; otherwise it says, in one line, the command to run and the setting that points the tests at another.
debian_tool_ready() {
  local program=$1 package=$2 used_for=$3 setting=$4
  [ -x "$program" ] && return 0
  if [ "$(id -u)" -eq 0 ] && command -v apt-get > /dev/null; then
    echo "installing Debian's $package for the tests (apt-get install $package) ..."
    { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "$package"; } \
      < /dev/null > "$AIRFLOW_HOME/apt-get-$package.log" 2>&1
    [ -x "$program" ] && return 0
    echo "error: installing $package failed (log: $AIRFLOW_HOME/apt-get-$package.log): run 'apt-get install $package' as root" >&2
    return 1
  fi
  echo "error: $program is missing ($used_for): run 'apt-get install $package' as root, or set $setting" >&2
  return 1
}
