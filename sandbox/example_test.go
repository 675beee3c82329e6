package sandbox_test

import (
	"errors"
	"fmt"

	"github.com/agentbox-dev/agentbox/sandbox"
)

func ExampleShellQuote() {
	fmt.Println(sandbox.ShellQuote("/srv/app"))
	fmt.Println(sandbox.ShellQuote("hello world"))
	fmt.Println(sandbox.ShellQuote("it's"))
	fmt.Println(sandbox.CommandLine("grep -r", []string{"TODO", "my dir"}))
	// Output:
	// /srv/app
	// 'hello world'
	// 'it'\''s'
	// grep -r TODO 'my dir'
}

// A Secret names the environment variable that holds its placeholder and
// the hosts its value may go to; it never prints its value.
func ExampleSecret() {
	s := sandbox.Secret{Name: "OPENAI_API_KEY", Value: "sk-example", Hosts: []string{"api.openai.com"}}
	fmt.Println(s.Validate())
	fmt.Println(s.Allows("api.openai.com"), s.Allows("evil.example"))
	fmt.Println(s)

	bad := sandbox.Secret{Name: "OPENAI-KEY", Value: "sk-example", Hosts: []string{"api.openai.com"}}
	fmt.Println(errors.Is(bad.Validate(), sandbox.ErrInvalidArgument))
	// Output:
	// <nil>
	// true false
	// Secret{Name: "OPENAI_API_KEY", Hosts: ["api.openai.com"], AllowHTTP: false, Value: <redacted>}
	// true
}
