"""Scrape a `/metrics` URL and read it with the Prometheus project's own Python parser.

    python tests/python/scrape_metrics.py URL

Prints ONE JSON document on stdout: the HTTP status and content type, and every metric family
the parser found, by name:

    {"status": 200, "content_type": "...",
     "families": {NAME: {"type": "counter", "samples": [{"name": N, "labels": {...}, "value": V}]}}}

A family the parser reads twice (the text repeats a metric) or text it cannot read fails the
run: the scrape must be what a Prometheus server would accept.
"""

from __future__ import annotations

import json
import sys
import urllib.request

from prometheus_client.parser import text_string_to_metric_families


def main() -> int:
    url = sys.argv[1]
    with urllib.request.urlopen(url, timeout=30) as resp:
        status = resp.status
        content_type = resp.headers.get("content-type", "")
        text = resp.read().decode("utf-8")
    families: dict[str, dict] = {}
    for family in text_string_to_metric_families(text):
        if family.name in families:
            raise SystemExit(f"metric family {family.name} appears twice")
        families[family.name] = {
            "type": family.type,
            "samples": [{"name": s.name, "labels": s.labels, "value": s.value} for s in family.samples],
        }
    json.dump({"status": status, "content_type": content_type, "families": families}, sys.stdout)
    return 0


if __name__ == "__main__":
    sys.exit(main())
