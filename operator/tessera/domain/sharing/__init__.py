"""tessera.domain.sharing: SharingPolicy, decided purely.

``planning.plan`` is the one call per reconcile; the modules it composes:

* ``assignment``  exactly one policy per node (priority, Conflict, held nodes);
* ``rendering``   what each policy renders to (device-plugin config or HAMi fields);
* ``device_plugin`` / ``parsing`` / ``node_rules``  config v1, the plugin's rules;
* ``configmap``   the one device-plugin ConfigMap and node labels, keys before labels;
* ``changes`` / ``states``  in place vs disruptive (rollout) per node;
* ``status``      matched/applied/conflicted, advertised capacity, the Verdict.
"""
