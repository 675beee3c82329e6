package toolbox

import (
	"context"
	"fmt"
	"net/http"
	"strings"

	"github.com/agentbox-dev/agentbox/sandbox"
)

// Languages of POST /process/code-run (CodeRunRequest.Language).
const (
	LanguagePython     = "python"
	LanguageJavaScript = "javascript"
	LanguageTypeScript = "typescript"
)

// CodeRunRequest is the body of POST /process/code-run.
type CodeRunRequest struct {
	Code string `json:"code"`
	// Language is LanguagePython, LanguageJavaScript or
	// LanguageTypeScript.
	Language string `json:"language"`
	// Argv are the program's arguments (sys.argv[1:], process.argv[2:]).
	Argv []string `json:"argv,omitempty"`
	// Envs are set in the program's environment.
	Envs map[string]string `json:"envs,omitempty"`
	// Timeout in seconds; 0 means none. A run that outlives it is killed
	// and answered with 408.
	Timeout int `json:"timeout,omitempty"`
}

// CodeRunResponse is the answer of POST /process/code-run. Result holds
// the program's stdout and stderr merged, as written.
type CodeRunResponse struct {
	ExitCode  int               `json:"exitCode"`
	Result    string            `json:"result"`
	Artifacts *CodeRunArtifacts `json:"artifacts,omitempty"`
}

// CodeRunArtifacts are what a run produced besides its output: the
// matplotlib figures a Python program showed (plt.show()).
type CodeRunArtifacts struct {
	Charts []Chart `json:"charts"`
}

// Chart describes one figure: its kind (Type: "line", "scatter", "bar",
// "pie", "composite_chart" or "unknown"), the axes' labels, ticks and
// scales, the plotted elements, and the whole figure as a base64 PNG. A
// composite chart (a figure with several axes) has one element per axes,
// each a chart of its own.
type Chart struct {
	Type        string         `json:"type,omitempty"`
	Title       string         `json:"title,omitempty"`
	PNG         string         `json:"png,omitempty"`
	XLabel      string         `json:"x_label,omitempty"`
	YLabel      string         `json:"y_label,omitempty"`
	XScale      string         `json:"x_scale,omitempty"`
	YScale      string         `json:"y_scale,omitempty"`
	XTicks      []float64      `json:"x_ticks,omitempty"`
	XTickLabels []string       `json:"x_tick_labels,omitempty"`
	YTicks      []float64      `json:"y_ticks,omitempty"`
	YTickLabels []string       `json:"y_tick_labels,omitempty"`
	Elements    []ChartElement `json:"elements,omitempty"`
}

// ChartElement is one plotted thing of a chart: a line or a scatter's
// Points, a bar (Label, Group, Value), a pie wedge (Label, Angle, Radius),
// or, in a composite chart, a whole sub-chart (the embedded Chart).
type ChartElement struct {
	Chart
	Label         string      `json:"label,omitempty"`
	Group         string      `json:"group,omitempty"`
	Value         string      `json:"value,omitempty"`
	Points        [][]float64 `json:"points,omitempty"`
	Angle         *float64    `json:"angle,omitempty"`
	Radius        *float64    `json:"radius,omitempty"`
	Min           *float64    `json:"min,omitempty"`
	Max           *float64    `json:"max,omitempty"`
	Median        *float64    `json:"median,omitempty"`
	FirstQuartile *float64    `json:"first_quartile,omitempty"`
	ThirdQuartile *float64    `json:"third_quartile,omitempty"`
	Outliers      []float64   `json:"outliers,omitempty"`
}

// CodeRun runs a program (POST /process/code-run) and returns its exit
// code, merged output and artifacts. A server-side timeout gives an
// *APIError with StatusCode 408; a language the sandbox cannot run, 400.
func (c *Client) CodeRun(ctx context.Context, req CodeRunRequest) (*CodeRunResponse, error) {
	if strings.TrimSpace(req.Code) == "" {
		return nil, fmt.Errorf("toolbox: code run: code is empty: %w", sandbox.ErrInvalidArgument)
	}
	if req.Language == "" {
		return nil, fmt.Errorf("toolbox: code run: language is empty (use %q, %q or %q): %w",
			LanguagePython, LanguageJavaScript, LanguageTypeScript, sandbox.ErrInvalidArgument)
	}
	if req.Timeout < 0 {
		return nil, fmt.Errorf("toolbox: code run: timeout must not be negative: %w", sandbox.ErrInvalidArgument)
	}
	var r CodeRunResponse
	if err := c.doJSON(ctx, http.MethodPost, "/process/code-run", nil, req, nil, &r); err != nil {
		return nil, err
	}
	return &r, nil
}
