"""A headless Chromium driven by chromedriver, as tests/test_report_browser.py and
bench/report_index.py start it: no sandbox, GPU or network of its own (no QUIC, updates, sync),
so a page's figures and errors are the page's."""

from __future__ import annotations

FLAGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
)


def start(chromium: str, chromedriver: str, profile: str, capabilities: dict | None = None):
    """The driver of a Chromium at ``chromium`` with its profile in ``profile`` (the caller's
    directory, removed by the caller); ``capabilities`` set as given. The caller quits it."""
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = chromium
    for flag in FLAGS:
        options.add_argument(flag)
    options.add_argument(f"--user-data-dir={profile}")
    for name, value in (capabilities or {}).items():
        options.set_capability(name, value)
    return webdriver.Chrome(options=options, service=Service(chromedriver))
