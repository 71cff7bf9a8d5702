"""tests/plugins holds packages that are not part of this project's test run: each is a
package of its own (its own pyproject.toml and tests), which a test of ours installs into a
directory of its own and runs from there (tests/integration/test_store_plugin.py)."""

collect_ignore_glob = ["*"]
