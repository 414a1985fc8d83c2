"""The conda side of img2gray: recipe rendering and builds (`build`), local channels (`channel`), installs
(`install`), offline stand-ins for the machine's toolchain (`standins`), the recipe's generated context
(`recipe_sync`) and the feedstock recipe of a release (`feedstock`)."""
