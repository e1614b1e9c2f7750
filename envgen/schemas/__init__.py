"""JSON Schemas (draft 2020-12) of envgen's data files, and the validator that checks them.

One ``<name>.schema.json`` per file: ``harvested-{torch,frameworks,cuda}``, ``curated-{os,cuda,
torch,frameworks,policy,toolchain,images}``, ``sources``, ``cells`` (matrix/) and
``lock-manifest`` (a lock's envgen.lock.json). :mod:`envgen.schemas.check` validates documents
against the matrix schemas.
"""
