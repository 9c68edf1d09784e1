"""tessera.domain.base: the leaves every tier of the domain uses, importing none of them.

* ``conditions`` kstatus conditions (``Ready``, ``Reconciling``, ``Stalled``) and verdicts;
* ``failures``   which API failures stall at once and which retry;
* ``selectors``  label selectors matched against labels;
* ``idle``       whether a pass may be skipped (its inputs are the last quiet pass's);
* ``lease``      who may write: the writer Lease;
* ``rules``      a broken rule said so a person can fix it (``RuleError``), and why a write
                 happens (``Note``).
"""
