package daemon

import (
	"bytes"
	"errors"
	"io"
	"io/fs"
	"net/http"
	"path"
	"strings"

	git "github.com/go-git/go-git/v5"
	formatcfg "github.com/go-git/go-git/v5/plumbing/format/config"
	"github.com/go-git/go-git/v5/storage/filesystem"

	"github.com/agentbox-dev/agentbox/toolbox"
)

// systemGitConfig is the system scope's file, where Debian's git has it.
const systemGitConfig = "/etc/gitconfig"

// gitConfigKey is a parsed config key: section[.subsection].name.
type gitConfigKey struct{ section, subsection, name string }

func parseGitConfigKey(key string) (gitConfigKey, error) {
	first, last := strings.IndexByte(key, '.'), strings.LastIndexByte(key, '.')
	if first <= 0 || last == len(key)-1 || strings.ContainsAny(key, "\n\x00") {
		return gitConfigKey{}, badRequest("config key %q is not of the form section.name or section.subsection.name", key)
	}
	k := gitConfigKey{section: key[:first], name: key[last+1:]}
	if last > first {
		k.subsection = key[first+1 : last]
	}
	return k, nil
}

// configFile returns the file of a config scope, as a sandbox path that
// is read and written inside the server's root: global (default, the
// home's .gitconfig), system (/etc/gitconfig) or local (the repository
// at path).
func (s *Server) configFile(scope, path string) (string, error) {
	switch scope {
	case "", "global":
		return s.globalGitConfig(), nil
	case "system":
		return systemGitConfig, nil
	case "local":
		if path == "" {
			return "", badRequest("path is required with scope local: name the repository")
		}
		repo, err := s.openRepo(path)
		if err != nil {
			return "", err
		}
		file, ok := s.localGitConfig(repo.Repository)
		if !ok {
			return "", badRequest("%s has no config file", repo.dir)
		}
		return file, nil
	}
	return "", badRequest("scope %q is not one of global, local or system", scope)
}

// globalGitConfig is the sandbox path of the global scope's file.
func (s *Server) globalGitConfig() string {
	return path.Join("/", s.gitHome(), ".gitconfig")
}

// localGitConfig returns the sandbox path of the config file of repo,
// opened from a folder resolved inside the root (openRepo): go-git names
// its .git folder by joining names to that folder's kernel name, which is
// turned back into the sandbox's path here, so the file (and a link named
// .git or config) is resolved inside the root again when it is read or
// written.
func (s *Server) localGitConfig(repo *git.Repository) (string, bool) {
	st, ok := repo.Storer.(*filesystem.Storage)
	if !ok {
		return "", false
	}
	dir, ok := s.root.sandboxPath(st.Filesystem().Root())
	if !ok {
		return "", false
	}
	return path.Join(dir, "config"), true
}

// gitHome is the home whose .gitconfig is the global scope: HOME of the
// commands' environment, else the server's home dir.
func (s *Server) gitHome() string {
	for _, kv := range s.environ() {
		if h, ok := strings.CutPrefix(kv, "HOME="); ok && h != "" {
			return h
		}
	}
	return s.homeDir
}

// readGitConfig reads a config file (a sandbox path, resolved inside the
// root); a missing one is empty.
func (s *Server) readGitConfig(file string) (*formatcfg.Config, error) {
	cfg := formatcfg.New()
	f, err := s.root.openRead(file)
	if errors.Is(err, fs.ErrNotExist) {
		return cfg, nil
	}
	if err != nil {
		return nil, fsError(file, err)
	}
	b, err := io.ReadAll(f)
	f.Close()
	if err != nil {
		return nil, fsError(file, err)
	}
	if err := formatcfg.NewDecoder(bytes.NewReader(b)).Decode(cfg); err != nil {
		return nil, errorf(http.StatusInternalServerError, codeInternal, "reading %s: %s", file, err)
	}
	return cfg, nil
}

// get returns the value of k in cfg and whether it is set.
func (k gitConfigKey) get(cfg *formatcfg.Config) (string, bool) {
	if !cfg.HasSection(k.section) {
		return "", false
	}
	opts := cfg.Section(k.section).Options
	if k.subsection != "" {
		sec := cfg.Section(k.section)
		if !sec.HasSubsection(k.subsection) {
			return "", false
		}
		opts = sec.Subsection(k.subsection).Options
	}
	if !opts.Has(k.name) {
		return "", false
	}
	return opts.Get(k.name), true
}

// setGitConfig sets keys to values in file (a sandbox path, resolved
// inside the root), creating it when missing.
func (s *Server) setGitConfig(file string, kv ...string) error {
	cfg, err := s.readGitConfig(file)
	if err != nil {
		return err
	}
	for i := 0; i+1 < len(kv); i += 2 {
		k, err := parseGitConfigKey(kv[i])
		if err != nil {
			return err
		}
		if k.subsection != "" {
			cfg.Section(k.section).Subsection(k.subsection).SetOption(k.name, kv[i+1])
		} else {
			cfg.Section(k.section).SetOption(k.name, kv[i+1])
		}
	}
	var buf bytes.Buffer
	if err := formatcfg.NewEncoder(&buf).Encode(cfg); err != nil {
		return err
	}
	if err := s.root.mkdirAll(path.Dir(file), 0o755); err != nil {
		return fsError(file, err)
	}
	if err := s.root.writeFileAtomic(file, buf.Bytes(), 0o644); err != nil {
		return fsError(file, err)
	}
	return nil
}

// gitConfigValue returns the value of key in effect for the repository
// at dir (local, then global, then system), "" when unset. dir is a
// folder's name on the server's own file system, resolved inside the root
// (fsRoot.hostPath), or "" for no repository.
func (s *Server) gitConfigValue(dir, key string) string {
	k, err := parseGitConfigKey(key)
	if err != nil {
		return ""
	}
	files := []string{s.globalGitConfig(), systemGitConfig}
	if dir != "" {
		if r, err := git.PlainOpen(dir); err == nil {
			if f, ok := s.localGitConfig(r); ok {
				files = append([]string{f}, files...)
			}
		}
	}
	for _, f := range files {
		if cfg, err := s.readGitConfig(f); err == nil {
			if v, ok := k.get(cfg); ok {
				return v
			}
		}
	}
	return ""
}

func (s *Server) handleGitGetConfig(w http.ResponseWriter, r *http.Request) error {
	q := r.URL.Query()
	k, err := parseGitConfigKey(q.Get("key"))
	if err != nil {
		return err
	}
	file, err := s.configFile(q.Get("scope"), q.Get("path"))
	if err != nil {
		return err
	}
	cfg, err := s.readGitConfig(file)
	if err != nil {
		return err
	}
	var out toolbox.GitConfigResponse
	if v, ok := k.get(cfg); ok {
		out.Value = &v
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

func (s *Server) handleGitSetConfig(w http.ResponseWriter, r *http.Request) error {
	var req toolbox.GitSetConfigRequest
	if err := s.decodeJSON(w, r, &req); err != nil {
		return err
	}
	if _, err := parseGitConfigKey(req.Key); err != nil {
		return err
	}
	if strings.ContainsAny(req.Value, "\n\x00") {
		return badRequest("config value of %q contains a newline or NUL byte", req.Key)
	}
	return s.setConfig(w, req.Scope, req.Path, req.Key, req.Value)
}

func (s *Server) handleGitConfigUser(w http.ResponseWriter, r *http.Request) error {
	var req toolbox.GitConfigureUserRequest
	if err := s.decodeJSON(w, r, &req); err != nil {
		return err
	}
	if req.Name == "" || req.Email == "" || strings.ContainsAny(req.Name+req.Email, "\n\x00") {
		return badRequest("name and email are required, on one line each")
	}
	return s.setConfig(w, req.Scope, req.Path, "user.name", req.Name, "user.email", req.Email)
}

// setConfig sets keys to values (kv: key, value, …) in a scope's file and
// answers 200.
func (s *Server) setConfig(w http.ResponseWriter, scope, path string, kv ...string) error {
	file, err := s.configFile(scope, path)
	if err != nil {
		return err
	}
	if err := s.setGitConfig(file, kv...); err != nil {
		return err
	}
	w.WriteHeader(http.StatusOK)
	return nil
}
