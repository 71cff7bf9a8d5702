"""Session fixtures of the deployment tests: the image, built once per session."""

from __future__ import annotations

import pytest

from tests.deploy.containers import Image, build_image


@pytest.fixture(scope="session")
def image() -> Image:
    """localhost/a2a-grpc-test:dev, built by `make image` from this tree."""
    return build_image()
