-- Argo CD health of a Tessera object (tessera.io: NodePoolGeometry, SharingPolicy, TenantQuota).
--
-- Tessera's status follows kstatus: status.observedGeneration, a Ready condition, and the
-- abnormal-true Reconciling and Stalled conditions, present only while True. This one script
-- serves all three kinds; hack/render_deploy.py copies it to
-- resource_customizations/tessera.io/<Kind>/health.lua and into argocd-cm.yaml. It uses only
-- Lua's base library: argocd-cm scripts run without the standard libraries.
local hs = {}
if obj.metadata.deletionTimestamp ~= nil then
  -- What Tessera's finalizer waits for differs by kind: a TenantQuota touches no node.
  local undoing = "returning the nodes"
  if obj.kind == "TenantQuota" then
    undoing = "deleting the tenant's ResourceQuotas"
  end
  hs.status = "Progressing"
  hs.message = "Deleting: Tessera is " .. undoing .. " before it releases its finalizer"
  return hs
end
if obj.status == nil or obj.status.observedGeneration == nil then
  hs.status = "Progressing"
  hs.message = "Waiting for Tessera to observe the object"
  return hs
end
local generation = obj.metadata.generation
local observed = obj.status.observedGeneration
if generation ~= nil and observed < generation then
  hs.status = "Progressing"
  hs.message = "Waiting for Tessera to observe generation " .. tostring(generation)
    .. " (status is for generation " .. tostring(observed) .. ")"
  return hs
end
local ready, reconciling, stalled, overcommitted = nil, nil, nil, nil
if obj.status.conditions ~= nil then
  for _, condition in ipairs(obj.status.conditions) do
    if condition.type == "Ready" then
      ready = condition
    elseif condition.type == "Reconciling" and condition.status == "True" then
      reconciling = condition
    elseif condition.type == "Stalled" and condition.status == "True" then
      stalled = condition
    elseif condition.type == "Overcommitted" and condition.status == "True" then
      overcommitted = condition
    end
  end
end
local function describe(condition)
  local text = (condition.reason or "") .. ": " .. (condition.message or "")
  -- A TenantQuota whose tenants together promise more than the pools advertise is
  -- Overcommitted. That is allowed (quotas are ceilings, as CPU limits may exceed a node), so
  -- it never turns the object Degraded — which would hold every later sync wave — but every
  -- message says it.
  if overcommitted ~= nil then
    text = text .. "; Overcommitted: " .. (overcommitted.message or "")
  end
  return text
end
if stalled ~= nil then
  hs.status = "Degraded"
  hs.message = describe(stalled)
  return hs
end
if reconciling ~= nil then
  -- A rollout held for a human (approval: Manual, or spec.rollout.paused) waits on an
  -- external event: Argo CD calls that Suspended.
  local paused = obj.spec ~= nil and obj.spec.rollout ~= nil and obj.spec.rollout.paused == true
  if reconciling.reason == "WaitingForApproval" or paused then
    hs.status = "Suspended"
  else
    hs.status = "Progressing"
  end
  hs.message = describe(reconciling)
  return hs
end
if ready ~= nil and ready.status == "True" then
  hs.status = "Healthy"
  hs.message = describe(ready)
  return hs
end
hs.status = "Progressing"
hs.message = "Waiting for the Ready condition"
return hs
