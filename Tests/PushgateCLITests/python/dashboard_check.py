#!/usr/bin/python3
"""Drives the operator dashboard (`GET /admin`) in headless Chromium, as an operator would.

usage: dashboard_check.py --url http://127.0.0.1:PORT/admin [--token TOKEN] --screenshot PATH
                          [--timeout SECONDS] [--stdin-timeout SECONDS] [--color-scheme light|dark]

One line each way, for the Swift test that drives it:
  stdout  READY {"received": N}      the page is live: token entered (when it asked), the event
                                     stream open (#status "live"), #received-total a number
  stdin   SENT <count> [<deviceId>]  the test has sent <count> pushes; <deviceId> holds some
  stdout  OK {...}                   #received-total reached N + count; #held, #stored, #unacked
                                     and #connected equal what GET /v1/admin/stats says; the
                                     device view (when a device is named) gives a reason in words
                                     ("... budget empty ..." or "... waits ..."); screenshots saved
  stdout  FAIL <message>             anything else (exit 1), then the browser's SEVERE console
                                     entries, one per line; a screenshot at PATH's .failed.png

Screenshots: the full page at 1280x800 to PATH, and at phone size (390x844) to PATH with -phone
before the extension, for a person to look at (the OK line gives the phone page's scrollWidth:
more than 390 means it scrolls sideways).

Uses Debian's python3-selenium with /usr/bin/chromium and /usr/bin/chromedriver (`.ci/run`
installs them); run it with /usr/bin/python3. Every wait is a WebDriverWait poll bounded by
--timeout, never a fixed sleep; a hard alarm bounds the whole run.
"""

import argparse
import base64
import json
import os
import select
import signal
import sys
import tempfile
import urllib.request

try:
    from selenium import webdriver
    from selenium.common.exceptions import TimeoutException
    from selenium.webdriver.chrome.service import Service
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import WebDriverWait
except ImportError as error:  # pragma: no cover - a setup problem, reported clearly
    print(
        f"FAIL cannot import selenium ({error}): apt-get install python3-selenium chromium chromium-driver "
        f"and run with /usr/bin/python3, not {sys.executable}",
        flush=True,
    )
    sys.exit(1)

# The figures the page shows as plain integers, by element id.
FIGURES = ["received-total", "delivered-total", "held", "stored", "unacked", "connected"]
# The page's figure -> the field of GET /v1/admin/stats that must agree with it once quiet.
AGREES_WITH_STATS = {"held": "held", "stored": "stored", "unacked": "unacked", "connected": "connectedDevices"}


class Failure(Exception):
    pass


def say(line):
    sys.stdout.write(line + "\n")
    sys.stdout.flush()


def text(driver, element_id):
    return driver.execute_script(
        "const e = document.getElementById(arguments[0]); return e ? e.textContent : null;", element_id
    )


def number(driver, element_id):
    value = (text(driver, element_id) or "").strip()
    return int(value) if value.isdigit() else None


def figures(driver):
    return {element_id: number(driver, element_id) for element_id in FIGURES}


def visible(driver, element_id):
    return driver.execute_script(
        "const e = document.getElementById(arguments[0]); return !!(e && e.offsetParent !== null);", element_id
    )


def describe(driver):
    """What the page shows now, for a failure message."""
    try:
        shown = {
            "status": text(driver, "status"),
            "authMessage": text(driver, "auth-message") if visible(driver, "auth-message") else None,
            **figures(driver),
        }
        return json.dumps(shown, sort_keys=True)
    except Exception as error:  # the browser may be the thing that failed
        return f"(page unreadable: {error})"


def wait(driver, seconds, what, condition):
    """Polls `condition` (a function of the driver) until it returns something other than None."""
    box = []

    def probe(d):
        value = condition(d)
        if value is None:
            return False
        box.append(value)
        return True

    try:
        WebDriverWait(driver, seconds, poll_frequency=0.1).until(probe)
    except TimeoutException:
        raise Failure(f"timed out after {seconds} s waiting for {what}; the page shows {describe(driver)}")
    return box[-1]


def admin_stats(url, token):
    """GET /v1/admin/stats beside the page, directly (no proxy: the gateway is local)."""
    base = url.split("?")[0].rstrip("/")
    base = base[: -len("/admin")] if base.endswith("/admin") else base
    headers = {"authorization": f"bearer {token}"} if token else {}
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    with opener.open(urllib.request.Request(base + "/v1/admin/stats", headers=headers), timeout=10) as response:
        return json.load(response)


def seconds_of(age):
    """The page's age text ("5s", "2m 3s", "1h 4m", "2d 1h") in seconds."""
    units = {"s": 1, "m": 60, "h": 3600, "d": 86400}
    total = 0
    for part in age.split():
        if len(part) < 2 or part[-1] not in units or not part[:-1].isdigit():
            raise Failure(f"the oldest held age {age!r} is not like 5s, 2m 3s, 1h 4m or 2d 1h")
        total += int(part[:-1]) * units[part[-1]]
    return total


def oldest_held_age(driver, args, device_id):
    """The age #top-held shows for the device, once at least a second has passed since its
    oldest held push and the age agrees (within the page's tick) with GET /v1/admin/stats."""
    cell = driver.execute_script(
        "for (const row of document.querySelectorAll('#top-held tr')) {"
        "  if (row.cells.length === 3 && row.cells[0].textContent === arguments[0]) return row.cells[2].textContent; }"
        "return null;", device_id,
    )
    held = [d for d in admin_stats(args.url, args.token).get("topHeldDevices", []) if d.get("deviceId") == device_id]
    if cell is None or not held or not cell.endswith(" ago"):
        return None
    expected = (driver.execute_script("return Date.now();") - held[0]["oldestHeldAt"]) / 1000
    shown = seconds_of(cell[: -len(" ago")])
    return shown if expected >= 2 and abs(shown - expected) <= 2 else None


def read_sent(seconds):
    ready, _, _ = select.select([sys.stdin], [], [], seconds)
    if not ready:
        raise Failure(f"no SENT line on stdin within {seconds} s")
    line = sys.stdin.readline()
    if not line:
        raise Failure("stdin closed before the SENT line")
    parts = line.split()
    if len(parts) not in (2, 3) or parts[0] != "SENT" or not parts[1].isdigit():
        raise Failure(f"expected 'SENT <count> [<deviceId>]' on stdin, got {line.strip()!r}")
    return int(parts[1]), (parts[2] if len(parts) == 3 else None)


def set_viewport(driver, width, height, scale, mobile):
    driver.execute_cdp_cmd(
        "Emulation.setDeviceMetricsOverride",
        {"width": width, "height": height, "deviceScaleFactor": scale, "mobile": mobile},
    )
    wait(driver, 10, f"a {width} px wide viewport", lambda d: True if d.execute_script("return innerWidth") == width else None)
    # Two animation frames: the page has laid out and redrawn its charts at the new size.
    driver.set_script_timeout(10)
    return driver.execute_async_script(
        "const done = arguments[arguments.length - 1];"
        "requestAnimationFrame(() => requestAnimationFrame(() => done(document.documentElement.scrollWidth)));"
    )


def full_page_screenshot(driver, path, width):
    metrics = driver.execute_cdp_cmd("Page.getLayoutMetrics", {})
    height = (metrics.get("cssContentSize") or metrics["contentSize"])["height"]
    shot = driver.execute_cdp_cmd(
        "Page.captureScreenshot",
        {"format": "png", "captureBeyondViewport": True, "clip": {"x": 0, "y": 0, "width": width, "height": height, "scale": 1}},
    )
    with open(path, "wb") as file:
        file.write(base64.b64decode(shot["data"]))


class Console:
    """The browser's console entries, kept across reads (chromedriver hands each out once)."""

    def __init__(self, driver):
        self.driver, self.entries = driver, []

    def read(self):
        try:
            self.entries += self.driver.get_log("browser")
        except Exception:
            pass
        return self.entries

    def severe(self):
        return [entry for entry in self.read() if entry.get("level") == "SEVERE"]

    def page_errors(self):
        """Uncaught exceptions: a page bug. (A 401 or 403 before the token is expected: network.)"""
        return [entry for entry in self.severe() if entry.get("source") == "javascript"]


def check(driver, console, args):
    set_viewport(driver, 1280, 800, 1, False)
    if args.color_scheme:
        driver.execute_cdp_cmd(
            "Emulation.setEmulatedMedia", {"features": [{"name": "prefers-color-scheme", "value": args.color_scheme}]}
        )
    driver.get(args.url)

    # A gateway with a token answers 401 and the page asks; one without answers loopback at once.
    first = wait(
        driver, args.timeout, "the token form or the live status",
        lambda d: "form" if visible(d, "token-input") else "live" if text(d, "status") == "live" else None,
    )
    token_entered = False
    if first == "form":
        if not args.token:
            raise Failure(f"the page asks for a token and none was given: {text(driver, 'auth-message')!r}")
        field = driver.find_element(By.ID, "token-input")
        field.clear()
        field.send_keys(args.token)
        driver.find_element(By.ID, "token-submit").click()  # the page says "connecting" at once
        token_entered = True

    def live(d):
        status = text(d, "status")
        if status in ("token needed", "forbidden"):
            raise Failure(f"the page refused the token ({status}): {text(d, 'auth-message')!r}")
        received = number(d, "received-total")
        return received if status == "live" and received is not None else None

    received = wait(driver, args.timeout, "#status live and a number in #received-total", live)
    say("READY " + json.dumps({"received": received}))

    count, device_id = read_sent(args.stdin_timeout)
    target = received + count
    wait(
        driver, args.timeout, f"#received-total >= {target}",
        lambda d: True if (number(d, "received-total") or 0) >= target else None,
    )

    last = {}

    def agrees(d):
        stats = admin_stats(args.url, args.token)
        shown = figures(d)
        last.update(page=shown, api={key: stats.get(field) for key, field in AGREES_WITH_STATS.items()})
        return shown if all(shown[key] == stats.get(field) for key, field in AGREES_WITH_STATS.items()) else None

    try:
        shown = wait(driver, args.timeout, "held, stored, unacked and connected as /v1/admin/stats has them", agrees)
    except Failure as failure:
        raise Failure(f"{failure}; last compared {json.dumps(last, sort_keys=True)}")

    device = None
    if device_id:
        field = driver.find_element(By.ID, "device-search-input")
        field.clear()
        field.send_keys(device_id)
        driver.find_element(By.ID, "device-search-submit").click()

        def explained(d):
            view = text(d, "device-view") or ""
            if "no such device" in view or "could not read" in view:
                raise Failure(f"the device view for {device_id!r} says: {view.strip()[:300]!r}")
            return view if device_id in view and ("budget empty" in view or "waits" in view) else None

        wait(driver, args.timeout, f"#device-view for {device_id} with a reason in words", explained)
        reasons = driver.execute_script(
            "return [...document.querySelectorAll('#device-view .reason')].map(e => e.textContent);"
        )
        device = {"id": device_id, "notifications": len(reasons), "reasons": reasons[:5]}
        device["oldestHeldAge"] = wait(
            driver, args.timeout, f"#top-held's oldest held age for {device_id} as old as its held push",
            lambda d: oldest_held_age(d, args, device_id),
        )

    full_page_screenshot(driver, args.screenshot, 1280)
    root, extension = os.path.splitext(args.screenshot)
    phone_path = root + "-phone" + (extension or ".png")
    phone_width = set_viewport(driver, 390, 844, 2, True)
    full_page_screenshot(driver, phone_path, 390)

    errors = console.page_errors()
    if errors:
        raise Failure(f"the page threw {len(errors)} uncaught error(s), first: {errors[0].get('message')}")
    return {
        "received": shown["received-total"],
        "delivered": shown["delivered-total"],
        "held": shown["held"],
        "stored": shown["stored"],
        "unacked": shown["unacked"],
        "connected": shown["connected"],
        "tokenEntered": token_entered,
        "device": device,
        "screenshot": args.screenshot,
        "phoneScreenshot": phone_path,
        "phoneScrollWidth": phone_width,
    }


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--url", required=True, help="the dashboard, http://127.0.0.1:PORT/admin")
    parser.add_argument("--token", default="", help="the admin token (none: the gateway must not ask)")
    parser.add_argument("--screenshot", required=True)
    parser.add_argument("--timeout", type=float, default=30, help="upper bound of each wait, seconds")
    parser.add_argument("--stdin-timeout", type=float, default=120, help="how long to wait for the SENT line")
    parser.add_argument("--color-scheme", choices=["light", "dark"])
    parser.add_argument("--chromium", default="/usr/bin/chromium")
    parser.add_argument("--chromedriver", default="/usr/bin/chromedriver")
    args = parser.parse_args()

    def on_alarm(signum, frame):
        # Second alarm: even the failure path hangs (a wedged browser); leave at once.
        signal.signal(signal.SIGALRM, lambda *_: os._exit(1))
        signal.alarm(20)
        raise Failure("hard timeout: the whole check took too long")

    signal.signal(signal.SIGALRM, on_alarm)
    signal.alarm(int(args.timeout * 6 + args.stdin_timeout + 60))

    profile = tempfile.TemporaryDirectory(prefix="dashboard-check-")
    driver = console = None
    try:
        options = webdriver.ChromeOptions()
        options.binary_location = args.chromium
        for flag in (
            "--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--disable-gpu", "--no-proxy-server",
            "--no-first-run", "--disable-extensions", "--hide-scrollbars", "--window-size=1280,800",
            f"--user-data-dir={profile.name}",
        ):
            options.add_argument(flag)
        options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
        driver = webdriver.Chrome(service=Service(executable_path=args.chromedriver, log_path=os.devnull), options=options)
        console = Console(driver)
        result = check(driver, console, args)
        signal.alarm(0)
        say("OK " + json.dumps(result, sort_keys=True))
        return 0
    except Exception as error:
        message = str(error) if isinstance(error, Failure) else f"{type(error).__name__}: {error}"
        say("FAIL " + " ".join(message.split()))
        if driver is not None:
            try:
                driver.save_screenshot(os.path.splitext(args.screenshot)[0] + ".failed.png")
            except Exception:
                pass
            for entry in console.severe():
                say("SEVERE " + " ".join(str(entry.get("message", "")).split()))
        return 1
    finally:
        if driver is not None:
            try:
                driver.quit()
            except Exception:
                pass
        profile.cleanup()


if __name__ == "__main__":
    sys.exit(main())
