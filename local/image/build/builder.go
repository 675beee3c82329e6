package build

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/agentbox-dev/agentbox/local/image"
)

// Build builds the image o describes and saves it under o.Names. The
// Dockerfile is parsed and every step planned (variables substituted,
// base images resolved, COPY and ADD sources read from the context)
// before anything runs: an unsupported instruction, a missing source or a
// bad substitution fails the build before any RUN. Errors about an
// instruction are *LineError. With several stages (FROM … AS NAME), each
// is built in turn and the last one is the image.
func (b *Builder) Build(ctx context.Context, o Options) (*image.Image, error) {
	logs := o.Logs
	if logs == nil {
		logs = io.Discard
	}
	df, err := readDockerfile(o)
	if err != nil {
		return nil, err
	}
	bc, err := openContext(o.ContextDir)
	if err != nil {
		return nil, err
	}
	stages, unused, err := b.planStages(ctx, df, bc, o)
	if err != nil {
		return nil, err
	}
	n := 0
	for _, sp := range stages {
		n += 1 + len(sp.steps)
		if slices.ContainsFunc(sp.steps, func(s *step) bool { return s.run != nil }) && b.Runner == nil {
			return nil, errors.New("the Dockerfile has RUN steps and this builder has no runner for them")
		}
	}
	if len(unused) > 0 {
		fmt.Fprintf(logs, "Warning: build arguments no ARG declares were not used: %s\n", strings.Join(unused, ", "))
	}
	built := make([]*image.Image, 0, len(stages))
	stepNo := 0
	for _, sp := range stages {
		base := sp.base
		if sp.baseStage >= 0 {
			base = built[sp.baseStage]
		}
		cur := &image.Image{Layers: slices.Clone(base.Layers), Config: cloneConfig(base.Config)}
		stepNo++
		fmt.Fprintf(logs, "Step %d/%d : %s\n", stepNo, n, sp.from.Text)
		for _, s := range sp.steps {
			if err := ctx.Err(); err != nil {
				return nil, err
			}
			stepNo++
			fmt.Fprintf(logs, "Step %d/%d : %s\n", stepNo, n, s.in.Text)
			if s.makesLayer() {
				layer, err := b.layer(ctx, cur, s, built, o, logs)
				if err != nil {
					return nil, &LineError{Line: s.in.Line, Instruction: s.in.Cmd, Err: err}
				}
				if layer != "" {
					cur.Layers = append(cur.Layers, layer)
				}
			}
			cur.Config = cloneConfig(s.config)
		}
		built = append(built, cur)
	}
	cur := built[len(built)-1]
	if len(o.Names) == 0 {
		fmt.Fprintf(logs, "Built %d layers; not saved: give the image a name to keep it\n", len(cur.Layers))
		return cur, nil
	}
	img, err := b.Store.Save(ctx, &image.Image{Kind: image.KindImage, Names: slices.Clone(o.Names), Layers: cur.Layers, Config: cur.Config})
	if err != nil {
		return nil, fmt.Errorf("save the built image: %w", err)
	}
	fmt.Fprintf(logs, "Successfully built %s\n", img.ID)
	for _, name := range o.Names {
		fmt.Fprintf(logs, "Successfully tagged %s\n", name)
	}
	return img, nil
}

// readDockerfile reads and parses the Dockerfile of o.
func readDockerfile(o Options) (*Dockerfile, error) {
	name := o.Dockerfile
	if name == "" {
		name = filepath.Join(o.ContextDir, "Dockerfile")
	}
	f, err := os.Open(name)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("no Dockerfile at %s: give its path (-f) or a context folder that has one: %w", name, err)
	}
	if err != nil {
		return nil, fmt.Errorf("open Dockerfile: %w", err)
	}
	defer f.Close()
	return Parse(f)
}

// layer returns the layer a step adds to cur ("" for none), from the
// cache when it has the step's key.
func (b *Builder) layer(ctx context.Context, cur *image.Image, s *step, built []*image.Image, o Options, logs io.Writer) (string, error) {
	c := cache{dir: b.CacheDir}
	if !o.NoCache {
		if e, ok := c.get(s.key); ok {
			fmt.Fprintln(logs, " ---> Using cache")
			return e.Layer, nil
		}
	}
	var layer string
	var err error
	switch {
	case s.run != nil:
		layer, err = b.Runner.Run(ctx, &image.Image{Layers: slices.Clone(cur.Layers), Config: cloneConfig(s.config)}, *s.run, logs)
	case s.copy != nil:
		layer, err = b.copyLayer(ctx, cur.Layers, s.copy, built)
	default:
		layer, err = b.workdirLayer(ctx, cur.Layers, s.workdir, s.config.User)
	}
	if err != nil {
		return "", err
	}
	if err := c.put(s.key, cacheEntry{Layer: layer, Instruction: s.in.Text}); err != nil {
		return "", err
	}
	return layer, nil
}

// copyLayer makes the layer of a COPY or ADD; a COPY --from reads its
// sources in the stage (of built) or image it names.
func (b *Builder) copyLayer(ctx context.Context, lower []string, op *copyOp, built []*image.Image) (string, error) {
	uid, gid, err := rootView{layers: lower}.owner(op.chown)
	if err != nil {
		return "", err
	}
	sources := op.sources
	if f := op.from; f != nil {
		from := f.img
		if f.stage >= 0 {
			from = built[f.stage]
		}
		if sources, err = (rootView{layers: from.Layers}).sources(op.names); err != nil {
			return "", err
		}
	}
	return b.Store.AddLayer(ctx, func(dir string) error {
		w := newLayerWriter(dir, lower, uid, gid)
		for _, s := range sources {
			if err := w.copySource(ctx, s, op.dest, op.destDir, op.chmod); err != nil {
				return fmt.Errorf("%s: %w", s.Name, err)
			}
		}
		return nil
	})
}

// workdirLayer makes the folder of a WORKDIR, owned by the USER in
// effect, unless the image has it: then there is no layer ("").
func (b *Builder) workdirLayer(ctx context.Context, lower []string, dir, user string) (string, error) {
	v := rootView{layers: lower}
	r, err := v.resolve(dir, true)
	if err != nil {
		return "", err
	}
	if _, fi, err := v.lstat(r); err == nil && fi.IsDir() {
		return "", nil
	}
	uid, gid, err := v.owner(user)
	if err != nil {
		return "", fmt.Errorf("owner of the new folder %s: %w", dir, err)
	}
	return b.Store.AddLayer(ctx, func(layer string) error {
		return newLayerWriter(layer, lower, uid, gid).mkdirs(r)
	})
}
