package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"strings"
	"time"

	"github.com/agentbox-dev/agentbox/local/image"
	"github.com/agentbox-dev/agentbox/local/image/build"
	"github.com/spf13/cobra"
	"golang.org/x/term"
)

func (a *app) imageCommand() *cobra.Command {
	c := &cobra.Command{
		Use:     "image",
		Aliases: []string{"images"},
		Short:   "Pull, list and remove the images local sandboxes start from",
		Long: `Images are kept in the state dir (DIR/images), unpacked once and shared
read-only by every sandbox that uses them. An image is one of:

  alpine:3.20, ghcr.io/org/img:tag, host:5000/img@sha256:…   a registry image
  oci:DIR or oci:DIR:TAG                                    an OCI image layout
  ./img.tar, /path/img.tar.gz                               a 'docker save' tarball, gzipped or not
  /path/rootfs                                              a root file system folder

Registry credentials come from ~/.docker/config.json and its credential
helpers ('docker login').`,
		Args: cobra.ArbitraryArgs,
		RunE: groupRunE,
	}
	var o pullFlags
	pull := &cobra.Command{
		Use:   "pull IMAGE...",
		Short: "Fetch images into the store (layers already there are not fetched again)",
		Args:  minArgs(1, "at least one image reference"),
		RunE: func(cmd *cobra.Command, args []string) error {
			return a.imagePull(cmd.Context(), cmd.OutOrStdout(), cmd.ErrOrStderr(), args, o)
		},
	}
	pull.Flags().StringVar(&o.platform, "platform", "", "the `OS/ARCH[/VARIANT]` to pull from a multi-platform image (default: this machine's)")
	pull.Flags().BoolVar(&o.insecure, "insecure", false, "talk plain HTTP to the registry and mirrors (a registry on loopback)")
	pull.Flags().StringArrayVar(&o.mirrors, "registry-mirror", nil, "a `HOST[:PORT]` to try before Docker Hub for its images (repeatable, tried in order)")
	c.AddCommand(pull, a.imageBuildCommand(),
		lsCommand("List images and snapshots", a.imageList),
		&cobra.Command{
			Use:     "rm IMAGE...",
			Aliases: []string{"remove"},
			Short:   "Remove images (by name or id) and the layers only they use",
			Args:    minArgs(1, "at least one image name or id (see 'agentbox image ls')"),
			RunE: func(cmd *cobra.Command, args []string) error {
				return a.imageRemove(cmd.Context(), cmd.OutOrStdout(), args)
			},
		},
		&cobra.Command{
			Use:   "prune",
			Short: "Remove images without a name and layers no image uses",
			Args:  noArgs,
			RunE: func(cmd *cobra.Command, _ []string) error {
				return a.imagePrune(cmd.Context(), cmd.OutOrStdout())
			},
		},
	)
	return c
}

// pullFlags are the flags of image pull.
type pullFlags struct {
	platform string
	insecure bool
	mirrors  []string
}

// imageStore opens the store of the state dir.
func (a *app) imageStore() (*image.Store, error) {
	return image.Open(filepath.Join(a.stateDir, "images"))
}

// imageError gives the store's errors their kind.
func imageError(err error) error {
	switch {
	case errors.Is(err, image.ErrNotFound):
		return withKind(KindNotFound, 0, fmt.Errorf("%w (see 'agentbox image ls')", err))
	case errors.Is(err, image.ErrInUse):
		return withKind(KindInUse, 0, err)
	}
	return err
}

func (a *app) imagePull(ctx context.Context, stdout, stderr io.Writer, refs []string, f pullFlags) error {
	s, err := a.imageStore()
	if err != nil {
		return err
	}
	var pulled []*image.Image
	for _, ref := range refs {
		o := image.PullOptions{Platform: f.platform, Insecure: f.insecure, Mirrors: f.mirrors}
		bar := newProgressBar(stderr, ref)
		if bar != nil {
			o.Progress = bar.update
		}
		img, err := s.Pull(ctx, ref, o)
		bar.finish(err == nil)
		if err != nil {
			return imageError(err)
		}
		if a.json {
			pulled = append(pulled, img)
			continue
		}
		fmt.Fprintf(stdout, "pulled %s: %s, %s, %s\n", ref, shortImageID(img.ID), plural(len(img.Layers), "layer"), byteSize(img.Size))
	}
	if a.json {
		return writeJSON(stdout, pulled)
	}
	return nil
}

func (a *app) imageList(ctx context.Context, w io.Writer) error {
	s, err := a.imageStore()
	if err != nil {
		return err
	}
	imgs, err := s.List(ctx)
	if err != nil {
		return err
	}
	if a.json {
		if imgs == nil {
			imgs = []*image.Image{}
		}
		return writeJSON(w, imgs)
	}
	now := time.Now()
	t := newTable(w, "NAME", "ID", "KIND", "LAYERS", "SIZE", "CREATED")
	for _, img := range imgs {
		name := "<none>"
		if len(img.Names) > 0 {
			name = strings.Join(img.Names, ", ")
		}
		t.row(name, shortImageID(img.ID), string(img.Kind), fmt.Sprint(len(img.Layers)), byteSize(img.Size), ago(now, img.Created))
	}
	return t.flush()
}

func (a *app) imageRemove(ctx context.Context, w io.Writer, refs []string) error {
	s, err := a.imageStore()
	if err != nil {
		return err
	}
	return a.sandboxEach(ctx, w, refs, "removed", func(ctx context.Context, _, ref string) error {
		return imageError(s.Remove(ctx, ref))
	})
}

func (a *app) imagePrune(ctx context.Context, w io.Writer) error {
	s, err := a.imageStore()
	if err != nil {
		return err
	}
	r, err := s.Prune(ctx)
	if err != nil {
		return err
	}
	// The build steps cached on layers the prune removed go too.
	n, err := build.PruneCache(filepath.Join(s.Dir(), buildCacheDir))
	if err != nil {
		return err
	}
	rep := pruneReport{PruneReport: r, CacheEntries: n}
	if a.json {
		if rep.Images == nil {
			rep.Images = []string{}
		}
		if rep.Layers == nil {
			rep.Layers = []string{}
		}
		return writeJSON(w, rep)
	}
	fmt.Fprintf(w, "removed %s, %s (%s), %s\n", plural(len(rep.Images), "image"), plural(len(rep.Layers), "layer"), byteSize(rep.Bytes), plural(rep.CacheEntries, "cached build step"))
	return nil
}

// buildCacheDir is the folder of the image store that holds the build
// steps' cache (local.NewImageBuilder).
const buildCacheDir = "build-cache"

// pruneReport is what image prune removed: the store's images and layers,
// and the build cache's entries whose layers went.
type pruneReport struct {
	image.PruneReport
	CacheEntries int `json:"cacheEntries"`
}

// plural writes n things: "1 layer", "2 layers".
func plural(n int, thing string) string {
	if n == 1 {
		return "1 " + thing
	}
	return fmt.Sprintf("%d %ss", n, thing)
}

// shortImageID is the first 12 hex digits of an image id.
func shortImageID(id string) string {
	h := strings.TrimPrefix(id, "sha256:")
	if len(h) > 12 {
		h = h[:12]
	}
	return h
}

// byteSize prints n bytes in the largest unit that keeps it ≥ 1.
func byteSize(n int64) string {
	const unit = 1024
	if n < unit {
		return fmt.Sprintf("%d B", n)
	}
	div, exp := int64(unit), 0
	for m := n / unit; m >= unit && exp < 4; m /= unit {
		div *= unit
		exp++
	}
	return fmt.Sprintf("%.1f %ciB", float64(n)/float64(div), "KMGTP"[exp])
}

// progressBar draws the progress of a pull on a terminal, on one line
// redrawn at most 10 times a second.
type progressBar struct {
	w     io.Writer
	ref   string
	width int
	last  time.Time
	p     image.Progress
	drawn bool
}

// newProgressBar returns a bar drawing on w, or nil when w is not a
// terminal (the bar's methods accept a nil bar).
func newProgressBar(w io.Writer, ref string) *progressBar {
	f, ok := w.(interface{ Fd() uintptr })
	if !ok || !term.IsTerminal(int(f.Fd())) {
		return nil
	}
	width, _, err := term.GetSize(int(f.Fd()))
	if err != nil || width <= 0 {
		width = 80
	}
	return &progressBar{w: w, ref: ref, width: width}
}

func (b *progressBar) update(p image.Progress) {
	b.p = p
	if now := time.Now(); now.Sub(b.last) >= 100*time.Millisecond {
		b.last = now
		b.draw()
	}
}

// finish draws the final state and ends the line.
func (b *progressBar) finish(ok bool) {
	if b == nil || !b.drawn && !ok {
		return
	}
	b.draw()
	fmt.Fprintln(b.w)
}

func (b *progressBar) draw() {
	b.drawn = true
	fmt.Fprint(b.w, "\r\x1b[K"+progressLine(b.ref, b.p, b.width))
}

// progressLine renders p in at most width columns:
//
//	alpine:3.20 [=========>          ] layers 1/3  12.0 MiB/25.3 MiB
func progressLine(ref string, p image.Progress, width int) string {
	counts := fmt.Sprintf(" layers %d/%d  %s", p.LayersDone, p.Layers, byteSize(p.BytesDone))
	if p.Bytes > 0 {
		counts += "/" + byteSize(p.Bytes)
	}
	if p.Layers == 0 {
		counts = " up to date"
	}
	barWidth := width - len([]rune(ref)) - len(counts) - 4
	if barWidth < 10 {
		return ref + counts
	}
	barWidth = min(barWidth, 40)
	var frac float64
	switch {
	case p.Bytes > 0:
		frac = float64(p.BytesDone) / float64(p.Bytes)
	case p.Layers > 0:
		frac = float64(p.LayersDone) / float64(p.Layers)
	default:
		frac = 1
	}
	done := min(int(frac*float64(barWidth)), barWidth)
	bar := strings.Repeat("=", done)
	if done < barWidth {
		bar += ">" + strings.Repeat(" ", barWidth-done-1)
	}
	return ref + " [" + bar + "]" + counts
}
