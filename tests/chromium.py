"""Headless Chromium through selenium, as the dashboard's browser tests and the docs'
screenshot script (docs/screenshots/take.py) drive it: Debian's chromium and its
driver."""
from selenium import webdriver
from selenium.webdriver.chrome.service import Service

CHROMIUM = "/usr/bin/chromium"
CHROMEDRIVER = "/usr/bin/chromedriver"


def chromium(profile, window="1400,1000", console_log=False):
    """A new headless browser with its profile in `profile` (a directory); with
    console_log, its console messages are kept (driver.get_log("browser"))."""
    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for argument in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                     f"--window-size={window}", f"--user-data-dir={profile}"):
        options.add_argument(argument)
    if console_log:
        options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    return webdriver.Chrome(service=Service(CHROMEDRIVER), options=options)
