"""Name rules shared by the service and the CLI."""

# Calibration names: no '@' (it separates the version in references like ``lab@3``) and
# nothing a URL path or a file name would mangle.
CALIBRATION_NAME_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9._-]{0,99}$"
