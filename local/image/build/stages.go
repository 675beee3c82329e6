package build

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"slices"
	"strconv"
	"strings"

	"github.com/agentbox-dev/agentbox/local/image"
)

// stagePlan is one planned stage of a build: from a FROM to the next.
type stagePlan struct {
	from Instruction
	name string // its AS name, lower case; "" without
	// base is the image its FROM names, unless that is an earlier stage:
	// baseStage then (else -1).
	base      *image.Image
	baseStage int
	steps     []*step
	key       string // the cache key of its last step (of its base without steps)
	config    image.Config
}

// copyFrom is what COPY --from names: an earlier stage or an image.
type copyFrom struct {
	stage int          // an earlier stage, else -1
	img   *image.Image // the image, when not a stage
	key   string       // the stage's key or the image's ID
}

// cacheKey is what a COPY --from's cache key takes from its origin.
func (f *copyFrom) cacheKey() string {
	if f == nil {
		return ""
	}
	return f.key
}

// planStages plans the stages of df up to o.Target (all without): global
// ARGs, each FROM's base (an image of the store, resolved now, or an
// earlier stage) and its steps.
// It returns the stages and the build args no ARG declared.
func (b *Builder) planStages(ctx context.Context, df *Dockerfile, bc *buildContext, o Options) ([]*stagePlan, []string, error) {
	global := &planner{df: df, buildArgs: o.BuildArgs, args: map[string]*string{}, used: map[string]bool{}}
	used := []map[string]bool{global.used}
	i := 0
	for ; df.Instructions[i].Cmd == "ARG"; i++ {
		if err := global.arg(df.Instructions[i]); err != nil {
			return nil, nil, err
		}
	}
	var stages []*stagePlan
	for i < len(df.Instructions) {
		end := i + 1
		for end < len(df.Instructions) && df.Instructions[end].Cmd != "FROM" {
			end++
		}
		sp, p, err := b.planStage(ctx, df, bc, o, global, stages, i, end)
		if err != nil {
			return nil, nil, err
		}
		stages = append(stages, sp)
		used = append(used, p.used)
		i = end
		if o.Target != "" && sp.name == strings.ToLower(o.Target) {
			return stages, unusedArgs(o.BuildArgs, used...), nil
		}
	}
	if o.Target != "" {
		return nil, nil, fmt.Errorf("no stage named %q in the Dockerfile: name one with FROM IMAGE AS %s", o.Target, o.Target)
	}
	return stages, unusedArgs(o.BuildArgs, used...), nil
}

// planStage plans the stage from its FROM at index start to end.
func (b *Builder) planStage(ctx context.Context, df *Dockerfile, bc *buildContext, o Options, global *planner, stages []*stagePlan, start, end int) (*stagePlan, *planner, error) {
	in := df.Instructions[start]
	ref, err := global.expand(in, in.Args[0])
	if err != nil {
		return nil, nil, err
	}
	if ref == "" {
		return nil, nil, &LineError{Line: in.Line, Instruction: in.Cmd, Err: fmt.Errorf("the image %q is empty after substitution", in.Args[0])}
	}
	if err := global.checkPlatform(in); err != nil {
		return nil, nil, err
	}
	sp := &stagePlan{from: in, baseStage: -1}
	if len(in.Args) == 3 {
		sp.name = strings.ToLower(in.Args[2])
	}
	var baseConfig image.Config
	if k := stageNamed(stages, ref, false); k >= 0 {
		sp.baseStage, baseConfig, sp.key = k, stages[k].config, stages[k].key
	} else {
		if sp.base, err = b.resolve(ctx, in, ref); err != nil {
			return nil, nil, err
		}
		baseConfig, sp.key = sp.base.Config, sp.base.ID
	}
	p := newPlanner(df, bc, o, baseConfig, global.args)
	p.copyFrom = func(cin Instruction, name string) (*copyFrom, error) {
		if k := stageNamed(stages, name, true); k >= 0 {
			return &copyFrom{stage: k, key: "stage:" + stages[k].key}, nil
		}
		if sp.name != "" && strings.EqualFold(name, sp.name) || name == strconv.Itoa(len(stages)) {
			return nil, fmt.Errorf("--from=%s names this stage: copy from an earlier one", name)
		}
		img, err := b.resolve(ctx, cin, name)
		if err != nil {
			return nil, err
		}
		return &copyFrom{stage: -1, img: img, key: "image:" + img.ID}, nil
	}
	if sp.steps, err = p.plan(start, end, sp.key); err != nil {
		return nil, nil, err
	}
	if len(sp.steps) > 0 {
		sp.key = sp.steps[len(sp.steps)-1].key
	}
	sp.config = cloneConfig(p.cfg)
	return sp, p, nil
}

// resolve returns the image ref names ("scratch": an empty one) for in.
func (b *Builder) resolve(ctx context.Context, in Instruction, ref string) (*image.Image, error) {
	if strings.EqualFold(ref, "scratch") {
		return &image.Image{ID: "scratch"}, nil
	}
	img, err := b.Store.Resolve(ctx, ref)
	if err != nil {
		return nil, &LineError{Line: in.Line, Instruction: in.Cmd, Err: fmt.Errorf("image %s: %w", ref, err)}
	}
	return img, nil
}

// stageNamed returns the index of the stage of stages called name (or,
// with numbers, numbered name), or -1.
func stageNamed(stages []*stagePlan, name string, numbers bool) int {
	if n, err := strconv.Atoi(name); numbers && err == nil && n >= 0 && n < len(stages) {
		return n
	}
	return slices.IndexFunc(stages, func(s *stagePlan) bool { return s.name != "" && s.name == strings.ToLower(name) })
}

// sources reads the sources of a COPY --from in the image v shows: paths
// from its root, symbolic links followed.
func (v rootView) sources(names []string) ([]source, error) {
	var out []source
	for _, n := range names {
		r, err := v.resolve(n, true)
		if err != nil {
			return nil, err
		}
		host, fi, err := v.lstat(r)
		if errors.Is(err, fs.ErrNotExist) {
			return nil, fmt.Errorf("no %s in the stage or image copied from: %w", n, err)
		} else if err != nil {
			return nil, err
		}
		s := source{Name: n, host: host}
		if !fi.IsDir() {
			s.Entries = []entry{{Mode: fi.Mode(), host: host}}
			out = append(out, s)
			continue
		}
		s.Dir = true
		err = v.walk(r, "", func(rel, host string, fi fs.FileInfo) {
			s.Entries = append(s.Entries, entry{Rel: rel, Mode: fi.Mode(), host: host})
		})
		if err != nil {
			return nil, err
		}
		out = append(out, s)
	}
	return out, nil
}

// walk calls fn for every file below the image folder dir, rel being
// its path from the walk's start: parents before what they hold.
func (v rootView) walk(dir, rel string, fn func(rel, host string, fi fs.FileInfo)) error {
	names, err := v.readDir(dir)
	if err != nil {
		return err
	}
	for _, name := range names {
		p, r := path.Join(dir, name), path.Join(rel, name)
		host, fi, err := v.lstat(p)
		if err != nil {
			return err
		}
		fn(r, host, fi)
		if fi.IsDir() {
			if err := v.walk(p, r, fn); err != nil {
				return err
			}
		}
	}
	return nil
}

// readDir lists the names the image folder dir shows, sorted: those of
// every layer's folder that lstat finds visible.
func (v rootView) readDir(dir string) ([]string, error) {
	seen := map[string]bool{}
	var names []string
	for _, l := range v.layers {
		es, err := os.ReadDir(l + path.Clean("/"+dir))
		if err != nil {
			continue // not a folder of this layer
		}
		for _, e := range es {
			if seen[e.Name()] {
				continue
			}
			seen[e.Name()] = true
			if _, _, err := v.lstat(path.Join(dir, e.Name())); err == nil {
				names = append(names, e.Name())
			} else if !errors.Is(err, fs.ErrNotExist) {
				return nil, err
			}
		}
	}
	slices.Sort(names)
	return names, nil
}
