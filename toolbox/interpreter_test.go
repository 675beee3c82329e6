package toolbox_test

import (
	"errors"
	"testing"

	"github.com/agentbox-dev/agentbox/sandbox"
	"github.com/agentbox-dev/agentbox/toolbox"
)

// TestCodeArguments: bad arguments fail before any request.
func TestCodeArguments(t *testing.T) {
	c, err := toolbox.NewClient(toolbox.ClientOptions{BaseURL: "http://127.0.0.1:1"})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx := t.Context()
	neg := -1
	for name, err := range map[string]error{
		"code-run empty": func() error {
			_, err := c.CodeRun(ctx, toolbox.CodeRunRequest{Code: " ", Language: "python"})
			return err
		}(),
		"code-run language": func() error { _, err := c.CodeRun(ctx, toolbox.CodeRunRequest{Code: "1"}); return err }(),
		"code-run timeout": func() error {
			_, err := c.CodeRun(ctx, toolbox.CodeRunRequest{Code: "1", Language: "python", Timeout: -1})
			return err
		}(),
		"run-code empty": func() error { _, err := c.RunCode(ctx, toolbox.InterpreterExecuteRequest{}, nil); return err }(),
		"run-code timeout": func() error {
			_, err := c.RunCode(ctx, toolbox.InterpreterExecuteRequest{Code: "1", Timeout: &neg}, nil)
			return err
		}(),
		"delete-context id": c.DeleteContext(ctx, ""),
	} {
		if !errors.Is(err, sandbox.ErrInvalidArgument) {
			t.Errorf("%s: %v, want ErrInvalidArgument", name, err)
		}
	}
}
