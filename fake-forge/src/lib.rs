//! The recording fake forge (being written).
