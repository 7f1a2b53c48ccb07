package schemas

import (
	"fmt"
	"strconv"
)

// Footer keys of the Parquet key/value metadata every legorl file carries.
const (
	FooterSchemaVersion = "legorl.schema_version"
	FooterTable         = "legorl.table"
	FooterRunID         = "legorl.run_id"
	FooterConfigHash    = "legorl.config_hash"
	FooterPolicyVersion = "legorl.policy_version"
	FooterCodeVersion   = "legorl.code_version"
)

// Footer is the provenance written into every Parquet file's footer, so a
// file found on its own still says what produced it.
type Footer struct {
	SchemaVersion int    // Version at write time
	Table         Table  // which dataset the file belongs to
	RunID         string // the run that wrote it
	ConfigHash    string // sha256 of the run configuration
	PolicyVersion int64  // the policy version the rows came from
	CodeVersion   string // legorl version that wrote it
}

// KeyValues returns the footer as Parquet key/value metadata.
func (f Footer) KeyValues() map[string]string {
	return map[string]string{
		FooterSchemaVersion: strconv.Itoa(f.SchemaVersion),
		FooterTable:         string(f.Table),
		FooterRunID:         f.RunID,
		FooterConfigHash:    f.ConfigHash,
		FooterPolicyVersion: strconv.FormatInt(f.PolicyVersion, 10),
		FooterCodeVersion:   f.CodeVersion,
	}
}

// Validate checks that the footer names a known table and a schema version
// this code can read.
func (f Footer) Validate() error {
	if !f.Table.Valid() {
		return fmt.Errorf("%w: %q", ErrUnknownTable, string(f.Table))
	}
	if f.SchemaVersion < 1 || f.SchemaVersion > Version {
		return fmt.Errorf("%w: file has %d, this build reads 1..%d", ErrSchemaVersion, f.SchemaVersion, Version)
	}
	if f.RunID == "" {
		return fmt.Errorf("%w: footer run id", ErrEmpty)
	}
	return nil
}

// ParseFooter reads a footer back from Parquet key/value metadata and
// validates it.
func ParseFooter(kv map[string]string) (Footer, error) {
	var f Footer
	v, ok := kv[FooterSchemaVersion]
	if !ok {
		return f, fmt.Errorf("%w: no %s key (not a legorl file?)", ErrSchemaVersion, FooterSchemaVersion)
	}
	var err error
	if f.SchemaVersion, err = strconv.Atoi(v); err != nil {
		return f, fmt.Errorf("%w: %s=%q", ErrSchemaVersion, FooterSchemaVersion, v)
	}
	if p := kv[FooterPolicyVersion]; p != "" {
		if f.PolicyVersion, err = strconv.ParseInt(p, 10, 64); err != nil {
			return f, fmt.Errorf("schemas: footer %s=%q is not an integer", FooterPolicyVersion, p)
		}
	}
	f.Table = Table(kv[FooterTable])
	f.RunID = kv[FooterRunID]
	f.ConfigHash = kv[FooterConfigHash]
	f.CodeVersion = kv[FooterCodeVersion]
	return f, f.Validate()
}
