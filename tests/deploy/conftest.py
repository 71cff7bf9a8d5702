"""Session fixtures of the deployment tests: the image, built once per session, and the chart's
tools (helm, kubecheck)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.deploy.charts import Renderer, build_kubecheck, helm_path
from tests.deploy.containers import Image, build_image


@pytest.fixture(scope="session")
def image() -> Image:
    """localhost/a2a-grpc-test:dev, built by `make image` from this tree."""
    return build_image()


@pytest.fixture(scope="session")
def chart(tmp_path_factory: pytest.TempPathFactory) -> Renderer:
    """helm and kubecheck, to render the chart and decode what it renders."""
    helm = helm_path()
    return Renderer(helm, build_kubecheck(Path(tmp_path_factory.mktemp("kubecheck"))))
