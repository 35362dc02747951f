"""pwcap's fuzzing campaign: damaged and hostile captures, and the promises checked on each.

- :mod:`fuzz.mutate` makes damaged captures from the sample captures, from a seed
  (:mod:`fuzz.layout` finds the fields it aims at);
- :mod:`fuzz.batch` decodes them in-process and checks :mod:`fuzz.invariants`, time and
  memory; :mod:`fuzz.campaign` runs many in watched worker processes (hangs, deaths);
- :mod:`fuzz.targets` are the coverage-guided targets (record reader, reassembly, the
  Pulsar and Kafka 0.7 decoders) that :mod:`fuzz.atheris_run` runs with atheris; the
  reassembly targets check the stream sink contract with :mod:`fuzz.stream_sink`, which the
  capture tests use too (the tests import the fuzzing tools, never the other way round);
- :mod:`fuzz.minimize` shrinks a failing input for the regression corpus
  (``fuzz/corpus``), which the tests replay; :mod:`fuzz.known` lists the open failures;
- :mod:`fuzz.catalogue` writes ``docs/robustness.md``, what pwcap answers to bad input.
"""

from pwcap.decode.engine import activate

activate()  # every module here decodes: pick the engine before any imports the decoders
