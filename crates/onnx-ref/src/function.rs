//! function (work in progress).
