package toolbox

// SetLimits lowers the answer size limits (MaxJSONBytes, MaxOutputBytes)
// for a test, so that a test need not send hundreds of MiB; restore puts
// them back.
func SetLimits(json, output int64) (restore func()) {
	j, o := maxJSONBytes, maxOutputBytes
	maxJSONBytes, maxOutputBytes = json, output
	return func() { maxJSONBytes, maxOutputBytes = j, o }
}
