"""The PyInstaller binary's entry: one executable that is gpuhook, gpuhook-runtime and the hooks.
Called as gpuhook-runtime (or gpuhook-runtime-py, behind the native front end) it is the shim; as
nvidia-container-runtime-hook, Docker's --gpus hook; otherwise the admin CLI (whose `hook` command is the
OCI hook)."""

import os
import sys


def main() -> None:
    name = os.path.basename(sys.argv[0])
    if name.startswith("gpuhook-runtime"):
        from gpuhook.cli.shim import main as shim

        shim()
    if name.startswith("nvidia-container-runtime-hook"):  # Docker's --gpus hook (gpuhook.cli.nvidia_hook), -py too
        from gpuhook.cli.nvidia_hook import main as gpus_hook

        sys.exit(gpus_hook())
    from gpuhook.cli.admin import main as cli

    sys.exit(cli())


if __name__ == "__main__":
    main()
