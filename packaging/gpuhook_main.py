"""The PyInstaller binary's entry: one executable that is gpuhook, gpuhook-runtime and the hook.
Called as gpuhook-runtime (or gpuhook-runtime-py, behind the native front end) it is the shim;
otherwise the admin CLI (whose `hook` command is the OCI hook)."""

import os
import sys


def main() -> None:
    if os.path.basename(sys.argv[0]).startswith("gpuhook-runtime"):
        from gpuhook.cli.shim import main as shim

        shim()
    from gpuhook.cli.admin import main as cli

    sys.exit(cli())


if __name__ == "__main__":
    main()
