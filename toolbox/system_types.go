package toolbox

// Wire types of the toolbox API's port, system and server routes
// (toolbox.json names).

// PortList is the answer of GET /port: the TCP ports listened on in the
// sandbox.
type PortList struct {
	Ports []int `json:"ports"`
}

// IsPortInUseResponse is the answer of GET /port/{port}/in-use.
type IsPortInUseResponse struct {
	IsInUse bool `json:"isInUse"`
}

// SystemMetrics is the answer of GET /system/metrics. Byte counts are in
// bytes; CPUUsedPct is the average CPU use over the sample window as a
// percentage of the CPU limit.
type SystemMetrics struct {
	CPUCount      int     `json:"cpuCount"`
	CPUUsedPct    float64 `json:"cpuUsedPct"`
	MemTotal      int64   `json:"memTotal"`
	MemUsed       int64   `json:"memUsed"`
	MemCache      int64   `json:"memCache"`
	DiskTotal     int64   `json:"diskTotal"`
	DiskUsed      int64   `json:"diskUsed"`
	DiskFree      int64   `json:"diskFree"`
	Timestamp     string  `json:"timestamp"`
	TimestampUnix int64   `json:"timestampUnix"`
}

// UpdateEnvRequest is the body of POST /env. Unset and UnsetValuePrefix
// are applied first, then Set.
type UpdateEnvRequest struct {
	// Set maps names to the values processes started afterwards get.
	Set map[string]string `json:"set,omitempty"`
	// Unset lists names to remove.
	Unset []string `json:"unset,omitempty"`
	// UnsetValuePrefix removes every variable whose value starts with it
	// and whose name is not a key of Set.
	UnsetValuePrefix string `json:"unsetValuePrefix,omitempty"`
}

// InitializeRequest is the body of POST /init.
type InitializeRequest struct {
	Token string `json:"token"`
}

// MessageResponse is the answer of POST /env and POST /init.
type MessageResponse struct {
	Message string `json:"message"`
}
