package spectest

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"

	"github.com/agentbox-dev/agentbox/internal/testenv"
	"github.com/getkin/kin-openapi/openapi2"
	"github.com/getkin/kin-openapi/openapi2conv"
	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/routers/gorillamux"
)

// SpecDir returns the folder holding Daytona's specification files: the
// value of AGENTBOX_DAYTONA_SPEC_DIR, or ../shared/daytona-api relative to
// the module root found by walking up from the working directory to go.mod.
// It fails when the folder does not exist, saying how to provide it.
func SpecDir() (string, error) {
	if dir := os.Getenv(EnvSpecDir); dir != "" {
		if _, err := os.Stat(filepath.Join(dir, ToolboxSpec)); err != nil {
			return "", fmt.Errorf("spectest: %s=%q does not hold the Daytona spec files: %w", EnvSpecDir, dir, err)
		}
		return dir, nil
	}
	wd, err := os.Getwd()
	if err != nil {
		return "", fmt.Errorf("spectest: %w", err)
	}
	root := wd
	for {
		if _, err := os.Stat(filepath.Join(root, "go.mod")); err == nil {
			break
		}
		parent := filepath.Dir(root)
		if parent == root {
			return "", fmt.Errorf("spectest: no go.mod above %s; set %s to the folder holding the Daytona spec files (toolbox.json)", wd, EnvSpecDir)
		}
		root = parent
	}
	dir := filepath.Join(root, "..", "shared", "daytona-api")
	if _, err := os.Stat(filepath.Join(dir, ToolboxSpec)); err != nil {
		return "", fmt.Errorf("spectest: Daytona spec files not found in %s (the default, ../shared/daytona-api beside the module root): %w; check them out there or set %s", filepath.Clean(dir), err, EnvSpecDir)
	}
	return filepath.Clean(dir), nil
}

// Dir returns the spec folder of SpecDir for a test that needs it. A folder
// named by AGENTBOX_DAYTONA_SPEC_DIR without the files fails the test; a
// missing default folder skips it saying how to provide the files, or fails
// it under AGENTBOX_REQUIRE_ALL=1.
func Dir(t testing.TB) string {
	t.Helper()
	dir, err := SpecDir()
	switch {
	case err == nil:
		return dir
	case os.Getenv(EnvSpecDir) != "":
		t.Fatal(err)
	default:
		testenv.Skip(t, err.Error())
	}
	return ""
}

// cache keeps one Validator per spec folder and API for the life of the
// test process, so that many tests share one load and conversion.
var cache struct {
	sync.Mutex
	byKey map[string]*Validator
}

// Load returns a Validator of the toolbox API (see New) for the spec folder
// given by SpecDir. The documents are loaded once per process and shared.
//
// Files that do not load fail the test, and so does a folder named by
// AGENTBOX_DAYTONA_SPEC_DIR without them. When the variable is unset and
// the default folder (../shared/daytona-api) is missing, as in a plain
// clone of the module, the test is skipped with a message naming the
// variable, or fails under AGENTBOX_REQUIRE_ALL=1 (see internal/testenv).
func Load(t testing.TB) *Validator {
	t.Helper()
	return load(t, "toolbox", New)
}

// LoadControlPlane is Load for the control-plane API (see NewControlPlane).
func LoadControlPlane(t testing.TB) *Validator {
	t.Helper()
	return load(t, "control-plane", NewControlPlane)
}

func load(t testing.TB, kind string, build func(dir string) (*Validator, error)) *Validator {
	t.Helper()
	dir := Dir(t)
	key := kind + "\x00" + dir
	cache.Lock()
	defer cache.Unlock()
	if v := cache.byKey[key]; v != nil {
		return v
	}
	v, err := build(dir)
	if err != nil {
		t.Fatal(err)
	}
	if cache.byKey == nil {
		cache.byKey = make(map[string]*Validator)
	}
	cache.byKey[key] = v
	return v
}

// New loads the toolbox documents (ToolboxSpec and DaemonSpec) from dir and
// returns a new Validator.
func New(dir string) (*Validator, error) {
	return newValidator(dir, toolboxSpecs)
}

// NewControlPlane loads the control-plane documents (ControlPlaneSpec and
// OldControlPlaneSpec) from dir and returns a new Validator. Their paths
// start after the API base URL, which already ends in /api: combine with
// WithBasePath("/api") for a server that serves them there.
func NewControlPlane(dir string) (*Validator, error) {
	v, err := newValidator(dir, controlPlaneSpecs)
	if err != nil {
		return nil, err
	}
	v.errorShape = controlPlaneError()
	return v, nil
}

// controlPlaneError is the schema of the control plane's errors, which
// its documents declare nowhere (no operation lists an error status, and
// there is no ErrorResponse schema): the body Daytona's NestJS API sends,
// {statusCode, error, message, path, timestamp}, error being the HTTP
// reason phrase (see reference/daytona-api.md §4).
func controlPlaneError() *openapi3.Schema {
	str := openapi3.NewStringSchema().NewRef()
	return openapi3.NewObjectSchema().
		WithProperty("statusCode", openapi3.NewIntegerSchema()).
		WithPropertyRef("error", str).
		WithPropertyRef("message", str).
		WithPropertyRef("path", str).
		WithPropertyRef("timestamp", str).
		WithRequired([]string{"statusCode", "error", "message", "path", "timestamp"})
}

type specFile struct {
	name     string
	swagger2 bool
	// lenient skips checking the document itself: api.json has paths
	// that differ only in a parameter's name, which OpenAPI forbids.
	lenient bool
}

var (
	toolboxSpecs      = []specFile{{ToolboxSpec, true, false}, {DaemonSpec, false, false}}
	controlPlaneSpecs = []specFile{{ControlPlaneSpec, false, true}, {OldControlPlaneSpec, false, true}}
)

func newValidator(dir string, files []specFile) (*Validator, error) {
	v := &Validator{}
	for _, f := range files {
		path := filepath.Join(dir, f.name)
		var doc *openapi3.T
		var err error
		if f.swagger2 {
			doc, err = loadSwagger2(path)
		} else {
			doc, err = loadOpenAPI3(path)
		}
		if err != nil {
			return nil, err
		}
		// Match any host: clients reach the server under arbitrary names
		// (a unix socket, a proxy); a base path is handled by WithBasePath.
		doc.Servers = openapi3.Servers{{URL: "/"}}
		allowDaytonaNulls(doc)
		if err := doc.Validate(context.Background(), openapi3.DisableExamplesValidation()); err != nil && !f.lenient {
			return nil, fmt.Errorf("spectest: %s is not a valid OpenAPI document: %w", f.name, err)
		}
		if f.lenient {
			mergeTwinPaths(doc)
		}
		r, err := gorillamux.NewRouter(doc)
		if err != nil {
			return nil, fmt.Errorf("spectest: routing %s: %w", f.name, err)
		}
		v.specs = append(v.specs, &spec{name: f.name, doc: doc, router: r})
	}
	return v, nil
}

// daytonaNulls lists the schema properties that Daytona's daemon sends as
// an explicit null although its documents do not say they may be null
// (their generator leaves x-nullable out): every field but cmdId of an
// async session exec's answer, and stdout and stderr of a sync answer to
// an SDK older than 0.167.0. SDKs read these answers, so servers that
// match Daytona send the nulls too, and the documents are read as allowing
// them.
var daytonaNulls = map[string][]string{
	"SessionExecuteResponse": {"output", "stdout", "stderr", "exitCode"},
}

// allowDaytonaNulls marks the properties of daytonaNulls nullable in doc.
func allowDaytonaNulls(doc *openapi3.T) {
	if doc.Components == nil {
		return
	}
	for name, props := range daytonaNulls {
		ref := doc.Components.Schemas[name]
		if ref == nil || ref.Value == nil {
			continue
		}
		for _, p := range props {
			if pr := ref.Value.Properties[p]; pr != nil && pr.Value != nil {
				pr.Value.Nullable = true
			}
		}
	}
}

func loadSwagger2(path string) (*openapi3.T, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("spectest: reading Daytona spec: %w (set %s to the folder holding it)", err, EnvSpecDir)
	}
	var doc2 openapi2.T
	if err := doc2.UnmarshalJSON(data); err != nil {
		return nil, fmt.Errorf("spectest: parsing %s: %w", path, err)
	}
	doc3, err := openapi2conv.ToV3(&doc2)
	if err != nil {
		return nil, fmt.Errorf("spectest: converting %s to OpenAPI 3: %w", path, err)
	}
	return doc3, nil
}

func loadOpenAPI3(path string) (*openapi3.T, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("spectest: reading Daytona spec: %w (set %s to the folder holding it)", err, EnvSpecDir)
	}
	doc, err := openapi3.NewLoader().LoadFromData(data)
	if err != nil {
		return nil, fmt.Errorf("spectest: parsing %s: %w", path, err)
	}
	return doc, nil
}

// pathVar matches a path template's variables.
var pathVar = regexp.MustCompile(`\{[^{}]+\}`)

// mergeTwinPaths moves the operations of paths that differ from an
// earlier one only in their variables' names (api.json's PUT
// /sandbox/{sandboxIdOrName}/secrets and GET /sandbox/{sandboxId}/secrets)
// into the earlier one, their path parameters renamed to its variables:
// the router matches a request to the first path of a shape only, and
// would not find the other's operations.
func mergeTwinPaths(doc *openapi3.T) {
	first := map[string]string{} // shape → the first path of that shape
	for _, path := range doc.Paths.InMatchingOrder() {
		shape := pathVar.ReplaceAllString(path, "{}")
		keep, seen := first[shape]
		if !seen {
			first[shape] = path
			continue
		}
		rename := map[string]string{}
		to := pathVar.FindAllString(keep, -1)
		for i, v := range pathVar.FindAllString(path, -1) {
			rename[strings.Trim(v, "{}")] = strings.Trim(to[i], "{}")
		}
		into := doc.Paths.Value(keep)
		for method, op := range doc.Paths.Value(path).Operations() {
			if into.GetOperation(method) != nil {
				continue
			}
			moved := *op
			moved.Parameters = nil
			for _, p := range op.Parameters {
				if p.Value != nil && p.Value.In == openapi3.ParameterInPath && rename[p.Value.Name] != "" {
					v := *p.Value
					v.Name = rename[v.Name]
					p = &openapi3.ParameterRef{Value: &v}
				}
				moved.Parameters = append(moved.Parameters, p)
			}
			into.SetOperation(method, &moved)
		}
		doc.Paths.Delete(path)
	}
}
