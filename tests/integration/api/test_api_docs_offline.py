"""``/docs`` works without the internet (issue #41, item 2): FastAPI's default page loads Swagger UI
from a CDN (blank offline); the API now serves Swagger UI's files from an installed package.
In process, kubernetes launcher on a recording endpoint, real Redis."""

from __future__ import annotations

import re

from fastapi.testclient import TestClient

URL = re.compile(r"""(?:src|href)\s*=\s*["']([^"']+)["']|url\s*:\s*["']([^"']+)["']""")


def test_the_docs_page_names_no_other_host_and_every_asset_is_served(api: TestClient) -> None:
    page = api.get("/docs")
    assert page.status_code == 200 and "text/html" in page.headers["content-type"]
    assert not re.search(r"https?://", page.text), page.text
    urls = [a or b for a, b in URL.findall(page.text)]
    assert {"/docs/assets/swagger-ui-bundle.js", "/docs/assets/swagger-ui.css", "/openapi.json"} <= set(
        urls
    ), urls
    for url in urls:
        assert url.startswith("/") and not url.startswith("//"), f"{url} is on another host"
        response = api.get(url)
        assert response.status_code == 200, url
        assert len(response.content) > 100, url
    assert "SwaggerUIBundle" in api.get("/docs/assets/swagger-ui-bundle.js").text
    assert "javascript" in api.get("/docs/assets/swagger-ui-bundle.js").headers["content-type"]
    assert "text/css" in api.get("/docs/assets/swagger-ui.css").headers["content-type"]


def test_no_page_loads_from_a_cdn(api: TestClient) -> None:
    """ReDoc (FastAPI's other CDN page) is off; the assets folder lists nothing and leaves nothing."""
    assert api.get("/redoc").status_code == 404
    assert api.get("/docs/assets/").status_code == 404
    assert api.get("/docs/assets/../../pyproject.toml").status_code == 404
