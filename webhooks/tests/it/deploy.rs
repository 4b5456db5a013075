//! Deploy manifest invariants (filled in with deploy/).
