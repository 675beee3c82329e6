package local

// PassiveRequestHeader marks a request to a sandbox's toolbox that only
// watches it (such as agentbox serve sampling GET /system/metrics for its
// dashboard): a GET carrying it with the value "1" is not a use of the
// sandbox, so it moves neither Info.LastUsedAt nor the auto-stop.
const PassiveRequestHeader = "X-Agentbox-Passive"
