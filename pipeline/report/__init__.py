"""Results files, human reports and figures."""
