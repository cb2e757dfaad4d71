"""What each file of the bundled OpenJTalk dictionaries must be: (size, sha256).

Written by ``tools/pack_openjtalk_dictionaries.py`` with the pack, and checked on
every unpacking. ``open_jtalk_dic_plus-0.4.1.post10``: pyopenjtalk-plus
0.4.1.post10's ``pyopenjtalk/dictionary`` (its wheel, unchanged), the default
reading's; ``open_jtalk_dic_utf_8-1.11``: the one SBV2 voices were trained with
(its sys.dic as the reference fixtures record it). Plain data, so that the build
hook can load this file by path.
"""

# The pack, in the package's _data folder.
PACK_NAME = "openjtalk_dictionaries.pack"

PINS: dict[str, dict[str, tuple[int, str]]] = {
    "open_jtalk_dic_plus-0.4.1.post10": {
        "COPYING": (5865, "f4eca42ebd930e2c6e57fca58319d989bebcd1510cb7714b149c50f5425135ea"),
        "char.bin": (262496, "1a3ade6a84c0e6b1cfbd04f3803f32aefe37139724359f2a6cc72abf68099b06"),
        "left-id.def": (77672, "db1adac8a7f9e5854cd82ea044c85115249206c8181b9d88cf92ae2ee5e87b84"),
        "matrix.bin": (3792262, "62fd16b4f64c851d5dc352ef0d5740c5fc83ddc7c203b2b0b1fc5271969a14ce"),
        "pos-id.def": (1923, "3460aa742053085af47cdfc889a1e0e6f557e89b406e501ba81c9ccc286de0c7"),
        "rewrite.def": (7457, "7f7c8dfbfe24092e8a149a9b6e0a3a7f1c2cf37d6c3dc29d1cccc6c004da9c1c"),
        "right-id.def": (77672, "db1adac8a7f9e5854cd82ea044c85115249206c8181b9d88cf92ae2ee5e87b84"),
        "sys.dic": (103305451, "23287ce5d518164b8b97683b1d9534df095556e446f3470a6c52bd737be74527"),
        "unk.dic": (5690, "f8ce58a6b49795680d68c4f2c5801296d4d3b047b4b7708baa1610f7e2d91f1f"),
    },
    "open_jtalk_dic_utf_8-1.11": {
        "COPYING": (3191, "5f011bf0350d7f191e0da7c72cd3345568f1c9891800855c52b1b19dc035914d"),
        "char.bin": (262496, "888ee94c5a8a7a26d24ab3f1b7155441351954fd51ea06b4a2f78bd742492b2f"),
        "left-id.def": (77672, "db1adac8a7f9e5854cd82ea044c85115249206c8181b9d88cf92ae2ee5e87b84"),
        "matrix.bin": (3792262, "62fd16b4f64c851d5dc352ef0d5740c5fc83ddc7c203b2b0b1fc5271969a14ce"),
        "pos-id.def": (1923, "3460aa742053085af47cdfc889a1e0e6f557e89b406e501ba81c9ccc286de0c7"),
        "rewrite.def": (7457, "7f7c8dfbfe24092e8a149a9b6e0a3a7f1c2cf37d6c3dc29d1cccc6c004da9c1c"),
        "right-id.def": (77672, "db1adac8a7f9e5854cd82ea044c85115249206c8181b9d88cf92ae2ee5e87b84"),
        "sys.dic": (103073776, "ca57d9029691a70a5dfb99afc2844180256161d7130da65b1a867510e129b9a6"),
        "unk.dic": (5690, "ce97851ecda075914fa3ffe7294a1ab34ee4f6d56ba6bf9197d74143b5dffbfe"),
    },
}
