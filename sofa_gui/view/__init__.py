"""Qt-free view logic: what the timeline shows and how, testable without a display.

The timeline's draw model (:mod:`.model`), lane layout (:mod:`.layout`), level-of-detail
index (:mod:`.lod`), colours (:mod:`.colors`), labels (:mod:`.names`), tooltip text
(:mod:`.tooltip`) and slice search (:mod:`.search`) live here; ``sofa_gui.qt`` only paints
them and turns input into calls. import-linter forbids Qt imports in this package.
"""
