"""Issue 23 item 14: the chart says how to get its unpublished image, and NOTES point at the
status page."""

from __future__ import annotations

from tests.deploy.test_chart import CHART, _notes


def test_notes_say_how_to_build_and_push_the_image_and_where_the_status_page_is() -> None:
    notes = _notes("--set", "image.registry=registry.example.com")
    assert "Image: registry.example.com/dpstream/dpstream:0.1.0" in notes
    assert "docker build -t <registry>/dpstream/dpstream:0.1.0 ." in notes
    assert "docker push" in notes and "ImagePullBackOff" in notes
    assert "http://127.0.0.1:9464/  (status page" in notes and "/readyz" in notes


def test_readme_says_the_image_is_not_published_and_how_to_build_it() -> None:
    readme = (CHART / "README.md").read_text()
    section = readme[readme.index("## The image") : readme.index("## Prerequisites")]
    assert "not published" in section.replace("**", "")
    assert "docker build" in section and "docker push" in section and "image.registry" in section
