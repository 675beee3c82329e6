package daytona

import (
	"errors"
	"fmt"
	"io/fs"
	"net/http"
	"net/url"
	"os"
	"time"

	"github.com/agentbox-dev/agentbox/internal/redact"
	"github.com/joho/godotenv"
)

// Environment variables read by ConfigFromEnv, as Daytona's SDKs name them.
const (
	EnvAPIKey         = "DAYTONA_API_KEY"
	EnvJWTToken       = "DAYTONA_JWT_TOKEN"
	EnvOrganizationID = "DAYTONA_ORGANIZATION_ID"
	EnvAPIURL         = "DAYTONA_API_URL"
	EnvTarget         = "DAYTONA_TARGET"
	// envServerURL is the deprecated alias of DAYTONA_API_URL.
	envServerURL = "DAYTONA_SERVER_URL"
)

// DefaultAPIURL is Daytona's API, used when no URL is configured.
const DefaultAPIURL = "https://app.daytona.io/api"

// Defaults of Config.
const (
	// DefaultMaxRetries is how many times a call is retried.
	DefaultMaxRetries = 3
	// DefaultRequestTimeout bounds one request (not a stream of logs).
	DefaultRequestTimeout = 60 * time.Second
	// SDKVersion is sent as X-Daytona-SDK-Version: the release of Daytona's
	// SDKs whose api.json this package follows.
	SDKVersion = "0.205.1"
	// Source is sent as X-Daytona-Source.
	Source = "agentbox"
)

// ErrNoCredentials is matched by the error of NewClient when neither an
// API key nor a JWT is configured.
var ErrNoCredentials = errors.New("no Daytona credentials: set DAYTONA_API_KEY (in the environment or a .env file) or Config.APIKey, or DAYTONA_JWT_TOKEN with DAYTONA_ORGANIZATION_ID")

// Config configures a Client. Set APIKey, or JWTToken with OrganizationID.
type Config struct {
	// APIKey is a Daytona API key, sent as a bearer token. It never
	// appears in errors or logs.
	APIKey string
	// JWTToken is a JWT used instead of an API key; it needs
	// OrganizationID.
	JWTToken string
	// OrganizationID is sent as X-Daytona-Organization-ID with a JWT.
	OrganizationID string
	// APIURL is the API's root, e.g. "https://app.daytona.io/api".
	// Default: DefaultAPIURL.
	APIURL string
	// Target is the region sandboxes are created in when a create names
	// none; "" lets the server choose.
	Target string
	// HTTPClient sends the requests. Default: a client of its own with
	// dial and TLS handshake timeouts, so that a wrong URL fails instead of
	// hanging.
	HTTPClient *http.Client
	// MaxRetries is how many times a failed call is retried: 0 means
	// DefaultMaxRetries, a negative value never.
	MaxRetries int
	// RetryBaseDelay is the first retry's average pause, doubling at each
	// retry up to RetryMaxDelay. Defaults: 200 ms and 5 s.
	RetryBaseDelay, RetryMaxDelay time.Duration
	// RequestTimeout bounds each request but streams. Default:
	// DefaultRequestTimeout.
	RequestTimeout time.Duration
	// Header is added to every request (for tests: serve's test knobs).
	Header http.Header
}

// ConfigFromEnv returns a Config from the environment, each variable
// missing there taken from the .env file envFile (".env" when empty) if
// that file exists. A missing file is no error; an unreadable one is.
func ConfigFromEnv(envFile string) (Config, error) {
	if envFile == "" {
		envFile = ".env"
	}
	file, err := godotenv.Read(envFile)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return Config{}, fmt.Errorf("daytona: reading %s: %w", envFile, err)
	}
	get := func(name string) string {
		if v, ok := os.LookupEnv(name); ok && v != "" {
			return v
		}
		return file[name]
	}
	cfg := Config{
		APIKey:         get(EnvAPIKey),
		JWTToken:       get(EnvJWTToken),
		OrganizationID: get(EnvOrganizationID),
		APIURL:         get(EnvAPIURL),
		Target:         get(EnvTarget),
	}
	if cfg.APIURL == "" {
		cfg.APIURL = get(envServerURL)
	}
	return cfg, nil
}

// merge returns c with its empty connection fields taken from env.
func (c Config) merge(env Config) Config {
	if c.APIKey == "" && c.JWTToken == "" {
		c.APIKey, c.JWTToken = env.APIKey, env.JWTToken
	}
	if c.OrganizationID == "" {
		c.OrganizationID = env.OrganizationID
	}
	if c.APIURL == "" {
		c.APIURL = env.APIURL
	}
	if c.Target == "" {
		c.Target = env.Target
	}
	return c
}

// check validates c and fills in its defaults.
func (c *Config) check() error {
	if c.APIKey == "" && c.JWTToken == "" {
		return fmt.Errorf("daytona: %w", ErrNoCredentials)
	}
	if c.APIKey == "" && c.OrganizationID == "" {
		return fmt.Errorf("daytona: a JWT (DAYTONA_JWT_TOKEN) needs an organization: set DAYTONA_ORGANIZATION_ID or Config.OrganizationID")
	}
	if c.APIURL == "" {
		c.APIURL = DefaultAPIURL
	}
	u, err := url.Parse(c.APIURL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.User != nil || u.RawQuery != "" {
		return fmt.Errorf("daytona: API URL %q is not an http(s) URL without credentials or query, such as %s: fix DAYTONA_API_URL or Config.APIURL", redact.URL(c.APIURL), DefaultAPIURL)
	}
	if c.MaxRetries == 0 {
		c.MaxRetries = DefaultMaxRetries
	}
	if c.RetryBaseDelay <= 0 {
		c.RetryBaseDelay = 200 * time.Millisecond
	}
	if c.RetryMaxDelay <= 0 {
		c.RetryMaxDelay = 5 * time.Second
	}
	if c.RequestTimeout <= 0 {
		c.RequestTimeout = DefaultRequestTimeout
	}
	return nil
}
