//! Pure admission logic for TransformerRegistration claims and the Platform singleton. (Skeleton; issue #2.)
