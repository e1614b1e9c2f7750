"""JSON Schemas (draft 2020-12) of envgen's data files, and the validator that checks them.

One ``<name>.schema.json`` per format: ``harvested-{torch,frameworks,cuda,os-toolkits}``,
``curated-{os,cuda,torch,frameworks,policy,toolchain,images,gpus,compilers,upstream,doctor}``,
``sources``, ``cells`` (matrix/), ``lock-manifest`` (a lock's envgen.lock.json),
``result-record`` and ``attempt-record`` (matrix/results/), ``compatibility-table`` (the
table's JSON) and ``doctor-snapshot`` (what envgen doctor knows of one environment).
:mod:`envgen.schemas.check` validates a document against one (fastjsonschema decides,
jsonschema lists the problems); :mod:`envgen.schemas.read` reads a TOML data file.
"""
