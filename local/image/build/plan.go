package build

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"path"
	"regexp"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/agentbox-dev/agentbox/local/image"
	"github.com/agentbox-dev/agentbox/sandbox"
)

// step is one planned instruction, its variables substituted.
type step struct {
	in Instruction
	// material is what the instruction's cache key is made of, besides
	// the parent's key.
	material string
	// key is the step's cache key: the parent step's key and material.
	key string
	// One of run, copy, workdir (a folder to make) or none (a step that
	// changes the configuration only).
	run     *RunStep
	copy    *copyOp
	workdir string
	// config is the image's configuration after the step.
	config image.Config
}

// makesLayer reports whether the step may add a layer.
func (s *step) makesLayer() bool { return s.run != nil || s.copy != nil || s.workdir != "" }

// planner turns instructions into steps.
type planner struct {
	df           *Dockerfile
	bc           *buildContext
	buildArgs    map[string]string
	blockNet     bool
	cfg          image.Config
	cmdInherited bool
	// args are the ARGs declared so far in the stage; a nil *string is
	// declared without a value.
	args     map[string]*string
	argOrder []string
	// globals are the ARGs declared before FROM, whose values an ARG
	// without a default in the stage takes.
	globals map[string]*string
	// copyFrom finds what COPY --from names: an earlier stage or an image.
	copyFrom func(in Instruction, name string) (*copyFrom, error)
	used     map[string]bool // build args some ARG declared
}

// newPlanner starts planning df's stage over base's configuration.
func newPlanner(df *Dockerfile, bc *buildContext, o Options, base image.Config, globals map[string]*string) *planner {
	return &planner{
		df:           df,
		bc:           bc,
		buildArgs:    o.BuildArgs,
		blockNet:     o.BlockNetwork,
		cfg:          cloneConfig(base),
		cmdInherited: len(base.Cmd) > 0,
		args:         map[string]*string{},
		globals:      globals,
		used:         map[string]bool{},
	}
}

// cloneConfig copies c, its slices included.
func cloneConfig(c image.Config) image.Config {
	c.Env = slices.Clone(c.Env)
	c.Entrypoint = slices.Clone(c.Entrypoint)
	c.Cmd = slices.Clone(c.Cmd)
	return c
}

// lookup finds a variable for substitution: ENV first, then ARG.
func (p *planner) lookup(name string) (string, bool) {
	for i := len(p.cfg.Env) - 1; i >= 0; i-- {
		if k, v, _ := strings.Cut(p.cfg.Env[i], "="); k == name {
			return v, true
		}
	}
	if v := p.args[name]; v != nil {
		return *v, true
	}
	return "", false
}

// expand substitutes the variables of word, an argument of in.
func (p *planner) expand(in Instruction, word string) (string, error) {
	x := &expander{escape: p.df.Escape, lookup: p.lookup}
	s, err := x.word(word)
	if err != nil {
		return "", &LineError{Line: in.Line, Instruction: in.Cmd, Err: err}
	}
	return s, nil
}

// plan plans the instructions of a stage after its FROM, at index from,
// up to end (excluded), chaining cache keys from parentKey.
func (p *planner) plan(from, end int, parentKey string) ([]*step, error) {
	var steps []*step
	key := parentKey
	for _, in := range p.df.Instructions[from+1 : end] {
		s, err := p.step(in)
		if err != nil {
			var le *LineError
			if !errors.As(err, &le) {
				err = &LineError{Line: in.Line, Instruction: in.Cmd, Err: err}
			}
			return nil, err
		}
		s.config = cloneConfig(p.cfg)
		if s.material == "" {
			b, _ := json.Marshal(s.config)
			s.material = string(b)
		}
		sum := sha256.Sum256([]byte(key + "\x00" + in.Cmd + "\x00" + s.material))
		key = "sha256:" + hex.EncodeToString(sum[:])
		s.key = key
		steps = append(steps, s)
	}
	return steps, nil
}

// step plans one instruction.
func (p *planner) step(in Instruction) (*step, error) {
	s := &step{in: in}
	switch in.Cmd {
	case "ARG":
		return s, p.arg(in)
	case "ENV":
		return s, p.env(in)
	case "LABEL", "EXPOSE":
		words, err := p.expandAll(in, in.Args)
		if err != nil {
			return nil, err
		}
		if in.Cmd == "EXPOSE" {
			if err := checkPorts(words); err != nil {
				return nil, err
			}
		}
		b, _ := json.Marshal(words)
		s.material = string(b)
		return s, nil
	case "USER":
		u, err := p.expand(in, in.Args[0])
		if err != nil {
			return nil, err
		}
		if u == "" {
			return nil, errors.New("empty user: write USER NAME[:GROUP] or UID[:GID]")
		}
		p.cfg.User = u
		return s, nil
	case "WORKDIR":
		d, err := p.expand(in, in.Args[0])
		if err != nil {
			return nil, err
		}
		if !path.IsAbs(d) {
			d = path.Join("/", p.cfg.WorkingDir, d)
		}
		p.cfg.WorkingDir = path.Clean(d)
		s.workdir = p.cfg.WorkingDir
		return s, nil
	case "CMD", "ENTRYPOINT":
		argv := p.command(in)
		if in.Cmd == "CMD" {
			p.cfg.Cmd, p.cmdInherited = argv, false
		} else {
			p.cfg.Entrypoint = argv
			if p.cmdInherited {
				p.cfg.Cmd, p.cmdInherited = nil, false
			}
		}
		return s, nil
	case "RUN":
		env := p.runEnv()
		s.run = &RunStep{Line: in.Line, Args: p.command(in), Env: slices.Concat(env, p.proxyEnv()), BlockNetwork: p.blockNet}
		b, _ := json.Marshal(struct {
			Args, Env []string
			Config    image.Config
		}{s.run.Args, env, p.cfg})
		s.material = string(b)
		return s, nil
	case "COPY", "ADD":
		op, err := p.copyOp(in)
		if err != nil {
			return nil, err
		}
		s.copy = op
		s.material = op.material()
		return s, nil
	}
	return nil, fmt.Errorf("instruction %w", ErrUnsupported)
}

// command is the argv of RUN, CMD or ENTRYPOINT.
func (p *planner) command(in Instruction) []string {
	if in.JSON || len(in.Args) == 0 {
		return slices.Clone(in.Args)
	}
	return []string{"/bin/sh", "-c", in.Args[0]}
}

// runEnv lists the ARGs with a value that ENV does not override.
func (p *planner) runEnv() []string {
	var env []string
	for _, name := range p.argOrder {
		v := p.args[name]
		if v == nil || slices.ContainsFunc(p.cfg.Env, func(kv string) bool { return strings.HasPrefix(kv, name+"=") }) {
			continue
		}
		env = append(env, name+"="+*v)
	}
	return env
}

// proxyArgs are the build arguments every RUN sees without an ARG, and
// that do not change a step's cache key, as with Docker.
var proxyArgs = []string{"HTTP_PROXY", "http_proxy", "HTTPS_PROXY", "https_proxy", "FTP_PROXY", "ftp_proxy", "NO_PROXY", "no_proxy", "ALL_PROXY", "all_proxy"}

// proxyEnv lists the proxy build arguments given and not declared by an
// ARG (runEnv has those).
func (p *planner) proxyEnv() []string {
	var env []string
	for _, name := range proxyArgs {
		if v, ok := p.buildArgs[name]; ok && p.args[name] == nil {
			env = append(env, name+"="+v)
		}
	}
	return env
}

func (p *planner) expandAll(in Instruction, words []string) ([]string, error) {
	out := make([]string, len(words))
	for i, w := range words {
		var err error
		if out[i], err = p.expand(in, w); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// arg declares the ARGs of in.
func (p *planner) arg(in Instruction) error {
	for _, w := range in.Args {
		name, def, hasDef := strings.Cut(w, "=")
		if !sandbox.ValidEnvName(name) {
			return &LineError{Line: in.Line, Instruction: in.Cmd, Err: fmt.Errorf("invalid name %q: names match [A-Za-z_][A-Za-z0-9_]*", name)}
		}
		var v *string
		if given, ok := p.buildArgs[name]; ok {
			v = &given
			p.used[name] = true
		} else if hasDef {
			d, err := p.expand(in, def)
			if err != nil {
				return err
			}
			v = &d
		} else if g := p.globals[name]; g != nil {
			v = g
		}
		if _, seen := p.args[name]; !seen {
			p.argOrder = append(p.argOrder, name)
		}
		p.args[name] = v
	}
	return nil
}

// env applies an ENV instruction: NAME=VALUE pairs, or the legacy
// NAME VALUE form. Values are substituted with the variables as they were
// before the instruction.
func (p *planner) env(in Instruction) error {
	var pairs [][2]string
	if !strings.Contains(in.Args[0], "=") {
		if len(in.Args) < 2 {
			return errors.New("needs NAME=VALUE (or NAME VALUE)")
		}
		v, err := p.expand(in, strings.Join(in.Args[1:], " "))
		if err != nil {
			return err
		}
		pairs = append(pairs, [2]string{in.Args[0], v})
	} else {
		for _, w := range in.Args {
			name, raw, ok := strings.Cut(w, "=")
			if !ok {
				return fmt.Errorf("%q has no '=': write NAME=VALUE for every variable of the line", w)
			}
			v, err := p.expand(in, raw)
			if err != nil {
				return err
			}
			pairs = append(pairs, [2]string{name, v})
		}
	}
	for _, kv := range pairs {
		if !sandbox.ValidEnvName(kv[0]) {
			return fmt.Errorf("invalid variable name %q: names match [A-Za-z_][A-Za-z0-9_]*", kv[0])
		}
		p.cfg.Env = setEnv(p.cfg.Env, kv[0], kv[1])
	}
	return nil
}

// setEnv sets name in env, in place of an earlier value.
func setEnv(env []string, name, value string) []string {
	for i, kv := range env {
		if strings.HasPrefix(kv, name+"=") {
			env[i] = name + "=" + value
			return env
		}
	}
	return append(env, name+"="+value)
}

var portRE = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[0-9]+(-[0-9]+)?(/(tcp|udp|sctp))?$`) })

// checkPorts checks the ports of EXPOSE.
func checkPorts(ports []string) error {
	for _, p := range ports {
		if !portRE().MatchString(strings.ToLower(p)) {
			return fmt.Errorf("invalid port %q: write PORT or PORT/tcp, PORT/udp", p)
		}
	}
	return nil
}

// unusedArgs lists the build args no ARG declared, but for the proxy
// ones, sorted.
func unusedArgs(buildArgs map[string]string, used ...map[string]bool) []string {
	var out []string
	for name := range buildArgs {
		if !slices.Contains(proxyArgs, name) && !slices.ContainsFunc(used, func(u map[string]bool) bool { return u[name] }) {
			out = append(out, name)
		}
	}
	slices.Sort(out)
	return out
}

// parseChmod reads a --chmod value: octal permission bits.
func parseChmod(s string) (uint32, error) {
	m, err := strconv.ParseUint(s, 8, 32)
	if err != nil || m > 0o7777 {
		return 0, fmt.Errorf("invalid --chmod=%s: give octal permission bits such as 755", s)
	}
	return uint32(m), nil
}

// checkPlatform accepts FROM --platform only for this machine's platform,
// the one the store resolves images for.
func (p *planner) checkPlatform(in Instruction) error {
	for _, f := range in.Flags {
		v, err := p.expand(in, strings.TrimPrefix(f, "--platform="))
		if err != nil {
			return err
		}
		if here := runtime.GOOS + "/" + runtime.GOARCH; v != here {
			return &LineError{Line: in.Line, Instruction: in.Cmd, Err: fmt.Errorf("--platform=%s: building for another platform than this machine's (%s) is %w", v, here, ErrUnsupported)}
		}
	}
	return nil
}
