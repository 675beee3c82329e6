package server

import (
	"cmp"
	"encoding/base64"
	"net/http"
	"slices"
	"strings"
)

// GET /secret/paginated: an organization's secrets whose name holds the
// name query (any case), sorted by name, createdAt (the default) or
// updatedAt, desc (the default) or asc, a page of limit (1 to 200,
// default 100) after the cursor of the page before. A cursor is the sort
// key and id of a page's last secret: secrets created or deleted
// meanwhile neither repeat nor hide others.

// listSecretsResponse is api.json's ListSecretsResponse.
type listSecretsResponse struct {
	Items      []secretDTO `json:"items"`
	Total      int         `json:"total"`
	NextCursor *string     `json:"nextCursor"`
}

// secretSortKeys map each sort field to a key of a Secret answer that
// sorts as the field does (as strings).
var secretSortKeys = map[string]func(secretDTO) string{
	"name":      func(d secretDTO) string { return d.Name },
	"createdAt": func(d secretDTO) string { return d.CreatedAt },
	"updatedAt": func(d secretDTO) string { return d.UpdatedAt },
}

// keyedSecret is a secret's answer and its sort key.
type keyedSecret struct {
	key string
	dto secretDTO
}

// compare orders a and b as the sort asks (desc: the reverse).
func (a keyedSecret) compare(b keyedSecret, desc bool) int {
	c := cmp.Or(cmp.Compare(a.key, b.key), cmp.Compare(a.dto.ID, b.dto.ID))
	if desc {
		return -c
	}
	return c
}

func (s *Server) listSecretsPaginated(w http.ResponseWriter, r *http.Request) error {
	q := r.URL.Query()
	limit, err := listLimit(q.Get("limit"), 100, 200)
	if err != nil {
		return err
	}
	key, ok := secretSortKeys[cmp.Or(q.Get("sort"), "createdAt")]
	if !ok {
		return errorf(http.StatusBadRequest, "sort must be one of the following values: name, createdAt, updatedAt")
	}
	desc := true
	switch q.Get("order") {
	case "", "desc":
	case "asc":
		desc = false
	default:
		return errorf(http.StatusBadRequest, "order must be one of the following values: asc, desc")
	}
	var after *keyedSecret
	if raw := q.Get("cursor"); raw != "" {
		c, err := decodeSecretCursor(raw)
		if err != nil {
			return err
		}
		after = &c
	}
	name := strings.ToLower(q.Get("name"))
	var all []keyedSecret
	for _, d := range s.orgSecrets(orgOf(r)) {
		if strings.Contains(strings.ToLower(d.Name), name) {
			all = append(all, keyedSecret{key(d), d})
		}
	}
	slices.SortFunc(all, func(a, b keyedSecret) int { return a.compare(b, desc) })
	out := listSecretsResponse{Items: []secretDTO{}, Total: len(all)}
	for _, e := range all {
		if after != nil && e.compare(*after, desc) <= 0 {
			continue
		}
		if len(out.Items) == limit {
			c := encodeSecretCursor(keyedSecret{key(out.Items[limit-1]), out.Items[limit-1]})
			out.NextCursor = &c
			break
		}
		out.Items = append(out.Items, e.dto)
	}
	writeJSON(w, out)
	return nil
}

func encodeSecretCursor(e keyedSecret) string {
	return base64.RawURLEncoding.EncodeToString([]byte(e.key + "\x00" + e.dto.ID))
}

func decodeSecretCursor(raw string) (keyedSecret, error) {
	b, err := base64.RawURLEncoding.DecodeString(raw)
	key, id, ok := strings.Cut(string(b), "\x00")
	if err != nil || !ok {
		return keyedSecret{}, errorf(http.StatusBadRequest, "cursor %q is not one this server gave", raw)
	}
	return keyedSecret{key: key, dto: secretDTO{ID: id}}, nil
}
