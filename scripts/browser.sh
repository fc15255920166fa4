# Sourced by scripts/test.sh: the browser the monitoring pages are tested in, Debian's chromium (Playwright drives
# it; its own browser downloads are not used). As root, installs the package when it is missing; otherwise stops
# with the command to run.
CHROMIUM=${SPARK_TABLES_TEST_CHROMIUM:-/usr/bin/chromium}

chromium_ready() {
  [ -x "$CHROMIUM" ] && return 0
  if [ "$(id -u)" -eq 0 ] && command -v apt-get > /dev/null; then
    echo "installing Debian's chromium for the browser tests (apt-get install chromium) ..."
    { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium; } \
      < /dev/null > "$AIRFLOW_HOME/apt-get-chromium.log" 2>&1
    [ -x "$CHROMIUM" ] && return 0
    echo "error: installing chromium failed (log: $AIRFLOW_HOME/apt-get-chromium.log): run 'apt-get install chromium' as root" >&2
    return 1
  fi
  echo "error: $CHROMIUM is missing (the monitoring pages' browser tests use it): run 'apt-get install chromium' as root, or set SPARK_TABLES_TEST_CHROMIUM" >&2
  return 1
}
