#!/usr/bin/python3
"""Creates a device and registers one topic with httpx over h2c.

usage: device_setup.py URL TOPIC
prints: {"deviceId", "secret", "token", "topic"}
"""

import sys

from pgcommon import create_device, emit, fail, h2c_client, hard_timeout


def main():
    hard_timeout(60, "device_setup.py")
    if len(sys.argv) != 3:
        fail("usage: device_setup.py URL TOPIC")
    url, topic = sys.argv[1], sys.argv[2]
    with h2c_client(url) as client:
        emit(create_device(client, topic))


if __name__ == "__main__":
    main()
