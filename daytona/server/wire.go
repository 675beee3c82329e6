package server

import "github.com/agentbox-dev/agentbox/sandbox"

// The JSON bodies of the control plane, as api.json names them. Decoding
// ignores unknown fields, as Daytona's API does.

// createSandbox is the body of POST /sandbox (CreateSandbox).
type createSandbox struct {
	Name                string              `json:"name"`
	Snapshot            string              `json:"snapshot"`
	User                string              `json:"user"`
	Env                 map[string]string   `json:"env"`
	Labels              map[string]string   `json:"labels"`
	Public              bool                `json:"public"`
	NetworkBlockAll     bool                `json:"networkBlockAll"`
	NetworkAllowList    string              `json:"networkAllowList"`
	DomainAllowList     string              `json:"domainAllowList"`
	OutboundProxyURL    string              `json:"outboundProxyUrl"`
	Target              string              `json:"target"`
	CPU                 *int                `json:"cpu"`
	GPU                 *int                `json:"gpu"`
	Memory              *int                `json:"memory"`
	Disk                *int                `json:"disk"`
	AutoStopInterval    *int                `json:"autoStopInterval"`
	AutoPauseInterval   *int                `json:"autoPauseInterval"`
	AutoArchiveInterval *int                `json:"autoArchiveInterval"`
	AutoDeleteInterval  *int                `json:"autoDeleteInterval"`
	TTLMinutes          *int                `json:"ttlMinutes"`
	Volumes             []volume            `json:"volumes"`
	BuildInfo           *createBuildInfo    `json:"buildInfo"`
	LinkedSandbox       string              `json:"linkedSandbox"`
	Secrets             []map[string]string `json:"secrets"`
}

// createBuildInfo is CreateBuildInfo.
type createBuildInfo struct {
	DockerfileContent string   `json:"dockerfileContent"`
	ContextHashes     []string `json:"contextHashes,omitempty"`
}

// volume is SandboxVolume.
type volume struct {
	VolumeID  string `json:"volumeId"`
	MountPath string `json:"mountPath"`
	Subpath   string `json:"subpath,omitempty"`
}

// sandboxDTO is Sandbox, the answer of most sandbox routes.
type sandboxDTO struct {
	sandboxListItem
	Env       map[string]string `json:"env"`
	Volumes   []volume          `json:"volumes"`
	BuildInfo *buildInfoDTO     `json:"buildInfo,omitempty"`
}

// sandboxListItem is SandboxListItem, what GET /sandbox lists: Sandbox
// without env and volumes.
type sandboxListItem struct {
	ID                  string            `json:"id"`
	OrganizationID      string            `json:"organizationId"`
	Name                string            `json:"name"`
	Target              string            `json:"target"`
	SandboxClass        string            `json:"sandboxClass"`
	State               string            `json:"state"`
	DesiredState        string            `json:"desiredState"`
	Snapshot            string            `json:"snapshot,omitempty"`
	User                string            `json:"user"`
	ErrorReason         string            `json:"errorReason,omitempty"`
	Recoverable         *bool             `json:"recoverable,omitempty"`
	Public              bool              `json:"public"`
	NetworkBlockAll     bool              `json:"networkBlockAll"`
	NetworkAllowList    string            `json:"networkAllowList,omitempty"`
	DomainAllowList     string            `json:"domainAllowList,omitempty"`
	CPU                 float64           `json:"cpu"`
	GPU                 float64           `json:"gpu"`
	Memory              float64           `json:"memory"`
	Disk                float64           `json:"disk"`
	Labels              map[string]string `json:"labels"`
	AutoStopInterval    int               `json:"autoStopInterval"`
	AutoArchiveInterval int               `json:"autoArchiveInterval"`
	AutoDeleteInterval  int               `json:"autoDeleteInterval"`
	AutoPauseInterval   int               `json:"autoPauseInterval"`
	AutoDestroyAt       string            `json:"autoDestroyAt,omitempty"`
	CreatedAt           string            `json:"createdAt"`
	UpdatedAt           string            `json:"updatedAt"`
	LastActivityAt      string            `json:"lastActivityAt,omitempty"`
	ToolboxProxyURL     string            `json:"toolboxProxyUrl"`
}

// listSandboxes is ListSandboxesResponse.
type listSandboxes struct {
	Items      []sandboxListItem `json:"items"`
	NextCursor *string           `json:"nextCursor"`
}

// paginatedSandboxes is PaginatedSandboxes_deprecated.
type paginatedSandboxes struct {
	Items      []sandboxDTO `json:"items"`
	Total      int          `json:"total"`
	Page       int          `json:"page"`
	TotalPages int          `json:"totalPages"`
}

// sandboxLabels is SandboxLabels, the body and answer of PUT …/labels.
type sandboxLabels struct {
	Labels map[string]string `json:"labels"`
}

// apply returns p with the fields of ns that are present in place of
// its own, validated and in canonical form.
func (ns *networkSettings) apply(p sandbox.NetworkPolicy) (sandbox.NetworkPolicy, error) {
	blockAll, allowList, domainAllowList := p.Wire()
	if ns.NetworkBlockAll != nil {
		blockAll = *ns.NetworkBlockAll
	}
	if ns.NetworkAllowList != nil {
		allowList = *ns.NetworkAllowList
	}
	if ns.DomainAllowList != nil {
		domainAllowList = *ns.DomainAllowList
	}
	return sandbox.ParseNetworkPolicy(blockAll, allowList, domainAllowList)
}

// networkSettings is UpdateSandboxNetworkSettings: absent fields keep
// their values.
type networkSettings struct {
	NetworkBlockAll  *bool   `json:"networkBlockAll"`
	NetworkAllowList *string `json:"networkAllowList"`
	DomainAllowList  *string `json:"domainAllowList"`
}

// toolboxProxyURL is ToolboxProxyUrl.
type toolboxProxyURL struct {
	URL string `json:"url"`
}

// configuration is DaytonaConfiguration, the answer of GET /config: the
// fields api.json requires, and what clients read.
type configuration struct {
	Version                string     `json:"version"`
	OIDC                   oidcConfig `json:"oidc"`
	LinkedAccountsEnabled  bool       `json:"linkedAccountsEnabled"`
	Announcements          struct{}   `json:"announcements"` // none
	ProxyTemplateURL       string     `json:"proxyTemplateUrl"`
	ProxyToolboxURL        string     `json:"proxyToolboxUrl"`
	DefaultSnapshot        string     `json:"defaultSnapshot"`
	DashboardURL           string     `json:"dashboardUrl"`
	MaxAutoArchiveInterval int        `json:"maxAutoArchiveInterval"`
	MaintenanceMode        bool       `json:"maintananceMode"` // sic: Daytona's spelling
	Environment            string     `json:"environment"`
}

// oidcConfig is OidcConfig: the server has no OIDC login, so it is empty.
type oidcConfig struct {
	Issuer   string `json:"issuer"`
	ClientID string `json:"clientId"`
	Audience string `json:"audience"`
}

// portPreviewURL is PortPreviewUrl.
type portPreviewURL struct {
	SandboxID string `json:"sandboxId"`
	URL       string `json:"url"`
	Token     string `json:"token"`
}

// signedPortPreviewURL is SignedPortPreviewUrl.
type signedPortPreviewURL struct {
	SandboxID string `json:"sandboxId"`
	Port      int    `json:"port"`
	Token     string `json:"token"`
	URL       string `json:"url"`
}
