//! Page walkers: the native 1D walk and the 2D walk composed of a guest and a nested walker.
