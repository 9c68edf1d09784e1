"""The recount right after a cordon (``tessera.domain.rollout.recount``), against the API.

The pass that admits a node has its cordon's write response: on that node's
own worker it lists the node's pods fresh (after the cordon landed, as
``kubectl drain`` does) and, with nothing to evict, requests the layout there
and then, instead of one pass over the whole pool later.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping

from tessera.adapters.events import Ref
from tessera.adapters.kube import ApiError, Obj
from tessera.api.v1alpha1.common import RolloutSpec
from tessera.controllers.rollout import driver
from tessera.controllers.runtime import Context, stopping
from tessera.domain import rollout
from tessera.domain.rollout import recount

log = logging.getLogger("tessera.rollout")


def follower(
    ctx: Context,
    owner: Ref,
    owner_id: str,
    policy: RolloutSpec,
    desired: Mapping[str, rollout.DesiredNode],
    view: Callable[[Obj], rollout.NodeView],
) -> Callable[[str, Obj], None]:
    """What ``driver.apply`` calls with each node it wrote (``then``): a node this
    pass has just cordoned gets its pods listed and, with nothing to evict, its layout."""

    def follow(name: str, node: Obj) -> None:
        seen = view(node)
        if not recount.just_cordoned(owner_id, seen) or stopping():
            return
        try:
            pods = driver.pods_on(ctx, [name])
        except ApiError as err:  # the next pass sees the cordon and recounts
            log.info(
                "%s/%s: recount of %s left to the next pass: %s", owner.kind, owner.name, name, err
            )
            return
        actions = recount.request_layouts(owner_id, policy, desired, [seen], pods, ctx.clock())
        if actions and not stopping():  # the list may have taken long: ask again
            driver.apply(ctx, owner, [actions], {name: seen})

    return follow
