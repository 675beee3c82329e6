package spectest

import (
	"regexp"
	"sort"

	"github.com/getkin/kin-openapi/openapi3"
)

// pathParam matches a path template's parameter.
var pathParam = regexp.MustCompile(`\{[^}]+\}`)

// mergeTwinPaths moves the operations of paths that differ from an
// earlier one (in sorted order) only in their parameters' names, such as
// api.json's GET /sandbox/{sandboxId}/secrets and PUT
// /sandbox/{sandboxIdOrName}/secrets, under that earlier path, their path
// parameters renamed: a router matches one path of such twins and would
// not find the other's methods. An operation whose method the earlier
// path has already is dropped.
func mergeTwinPaths(doc *openapi3.T) {
	if doc.Paths == nil {
		return
	}
	keys := doc.Paths.Keys()
	sort.Strings(keys)
	first := map[string]string{} // template without names → path
	for _, key := range keys {
		shape := pathParam.ReplaceAllString(key, "{}")
		into, ok := first[shape]
		if !ok {
			first[shape] = key
			continue
		}
		rename := map[string]string{}
		from, to := pathParam.FindAllString(key, -1), pathParam.FindAllString(into, -1)
		for i := range from {
			rename[from[i][1:len(from[i])-1]] = to[i][1 : len(to[i])-1]
		}
		target, twin := doc.Paths.Value(into), doc.Paths.Value(key)
		for method, op := range twin.Operations() {
			if target.GetOperation(method) == nil {
				target.SetOperation(method, renamedParams(op, append(twin.Parameters, op.Parameters...), rename))
			}
		}
		doc.Paths.Delete(key)
	}
}

// renamedParams returns a copy of op with params, its path parameters
// renamed as rename says.
func renamedParams(op *openapi3.Operation, params openapi3.Parameters, rename map[string]string) *openapi3.Operation {
	out := *op
	out.Parameters = nil
	for _, p := range params {
		if p.Value != nil && p.Value.In == openapi3.ParameterInPath && rename[p.Value.Name] != "" {
			v := *p.Value
			v.Name = rename[v.Name]
			p = &openapi3.ParameterRef{Value: &v}
		}
		out.Parameters = append(out.Parameters, p)
	}
	return &out
}
