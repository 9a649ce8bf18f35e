"""File formats: capture bundle (EXR + JSON), keypoint format conversions, mesh export. numpy only; import submodules directly."""
