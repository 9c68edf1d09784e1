"""tessera.controllers.sharing: the SharingPolicy pass's steps (``controllers.sharingpolicy``).

* ``observe``      the policies, Nodes and ConfigMaps one pass plans from;
* ``apply``        one SharingPlan written in the order the node agents need;
* ``rollout``      backend switches through the rollout engine;
* ``pod_contract`` each policy's ValidatingAdmissionPolicy and binding.
"""
