"""The FSx-enabled variant lives in tests/conftest.py (the upgrade suite uses it too)."""

from tests.conftest import FSX_CHANGES, fsx_config_data

__all__ = ["FSX_CHANGES", "fsx_config_data"]
