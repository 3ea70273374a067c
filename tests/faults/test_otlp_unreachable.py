"""An OTLP collector that is not there (issue 48, item 7): OpenTelemetry's exporter retried
every batch until its ten-second deadline, printed a raw line for each retry, and nothing
said the spans never arrived. Now an export waits a short deadline once, the batches after
a failed one are not sent, the exporter's lines stay off the terminal, and one warning says
how many spans were not delivered, where (without the endpoint's credentials) and what to
do."""
from __future__ import annotations

import logging
import socket
import time
import warnings

import pytest

import pallas_prof
from pallas_prof.instrument import delivery
from . import inject

DEADLINE_S = 0.5      # the short deadline, shorter still here: the test stays quick


def _closed_port() -> int:
  with socket.socket() as s:
    s.bind(("127.0.0.1", 0))
    return s.getsockname()[1]


@pytest.mark.fault("secret")
@pytest.mark.parametrize("protocol", ["http/protobuf", "grpc"])
def test_an_unreachable_collector_costs_one_short_deadline_and_is_said_once(
    monkeypatch, caplog, capfd, protocol):
  for name in delivery.TIMEOUT_VARIABLES:
    monkeypatch.delenv(name, raising=False)
  monkeypatch.setattr(delivery, "OTLP_TIMEOUT_S", DEADLINE_S)
  port = _closed_port()
  scheme_and_host = f"http://127.0.0.1:{port}"
  endpoint = (f"http://user:hunter2@127.0.0.1:{port}/v1/traces?api_key=s3cret"
              if protocol != "grpc" else f"http://127.0.0.1:{port}")
  caplog.set_level(logging.DEBUG)
  batches = 4
  start = time.monotonic()
  with warnings.catch_warnings(record=True) as said:
    warnings.simplefilter("always")
    with pallas_prof.tracing(otlp_endpoint=endpoint, otlp_protocol=protocol) as t:
      tracer = t.provider.get_tracer("test")
      for batch in range(batches):
        for i in range(3):
          with tracer.start_as_current_span(f"span {batch}.{i}"):
            pass
        t.flush()                         # each group its own batch
  took = time.monotonic() - start
  # one deadline (the first batch), none for the later batches nor at exit
  assert took < DEADLINE_S * 2 + 2.0, f"{took:.1f} s"
  messages = [str(w.message) for w in said if "not delivered" in str(w.message)]
  assert len(messages) == 1, [str(w.message) for w in said]
  inject.assert_clear(messages[0], scheme_and_host, "refused", "Start the collector",
                      "--otlp-endpoint")
  assert f"{3 * batches + 1} span(s)" in messages[0]            # all of them, the root too
  assert "hunter2" not in messages[0] and "s3cret" not in messages[0] and "user" not in \
      messages[0]
  out, err = capfd.readouterr()
  raw = [r.getMessage() for r in caplog.records if r.name.startswith("opentelemetry.exporter")]
  assert not raw, raw                                           # no raw retry lines
  assert "Transient error" not in out + err and "Failed to export" not in out + err


def test_shown_endpoint_keeps_scheme_host_and_port_only():
  assert delivery.shown_endpoint("https://u:p@collector.example:4318/v1/traces?token=x") == \
      "https://collector.example:4318"
  assert delivery.shown_endpoint("tok@localhost:4317") == "localhost:4317"
  assert delivery.shown_endpoint("http://[::1]:4318") == "http://[::1]:4318"
